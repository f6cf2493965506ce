//! A fixed multi-topic research conversation: silicon battery anodes, then the levelized cost
//! of storage of flow batteries, then how long-context language models use their prompt.
//! Syntheses come as a research tool returns them, with `# Cited Sources` lists mixing DOIs,
//! arXiv ids and author-year references.

use super::ResearchTurn;

fn turn(user: &str, tool_outputs: &[&str], answer: &str) -> ResearchTurn {
    ResearchTurn {
        user: user.to_owned(),
        tool_outputs: tool_outputs.iter().map(|s| (*s).to_owned()).collect(),
        answer: answer.to_owned(),
    }
}

/// Turns 1–3: silicon anodes (two turns), then the pivot to flow batteries.
pub fn first_block() -> Vec<ResearchTurn> {
    vec![
        turn(
            "What limits the cycle life of silicon anodes compared with graphite?",
            &[r"## Synthesis: cycle life of silicon anodes

Silicon alloys with lithium up to Li15Si4 at room temperature, a theoretical capacity of 3,579 mAh/g against 372 mAh/g for graphite (Obrovac & Chevrier, 2014). The price is a volume change of roughly 280 % on full lithiation, which cracks particles, isolates active material and ruptures the solid-electrolyte interphase (SEI) on every cycle. Fresh SEI consumes lithium and electrolyte, so coulombic efficiency stays below 99.5 % for micron-sized particles.

Chan et al. (2008) showed that silicon nanowires accommodate the strain without pulverizing and held 75 % of the theoretical capacity over 10 cycles at C/20. Below a critical diameter of about 150 nm, particles no longer fracture on first lithiation (Liu et al., 2012).

# Cited Sources
1. Obrovac, M. N.; Chevrier, V. L. Alloy Negative Electrodes for Li-Ion Batteries. Chem. Rev. 114, 11444–11502 (2014). https://doi.org/10.1021/cr500207g
2. Chan, C. K. et al. High-performance lithium battery anodes using silicon nanowires. Nat. Nanotechnol. 3, 31–35 (2008). doi:10.1038/nnano.2007.411
3. Liu, X. H. et al. Size-Dependent Fracture of Silicon Nanoparticles During Lithiation. ACS Nano 6, 1522–1531 (2012). doi:10.1021/nn204476h"],
            "Silicon's cycle life is limited by mechanics, not chemistry: a volume change of about 280 % cracks particles and the SEI, and every crack consumes lithium. The main difference from graphite is therefore the unstable interphase, which keeps coulombic efficiency below 99.5 % for micron-sized silicon. Nanostructuring below about 150 nm avoids fracture (Liu et al., 2012), and nanowires were the first design to show it (Chan et al., 2008).",
        ),
        turn(
            "Does the pomegranate design solve the SEI problem, and at what loading?",
            &[r"## Synthesis: yolk-shell and pomegranate anodes

Liu et al. (2014) clustered silicon nanoparticles inside a carbon shell with internal void space, so that the particles expand into the void while the outer SEI stays intact. The electrodes retained 97 % of their capacity after 1,000 cycles and reached a coulombic efficiency of 99.87 %. The areal capacity was 3.7 mAh/cm² at an industrial-level mass loading, although the tap density of such secondary particles remains lower than that of graphite.

Electrolyte additives such as fluoroethylene carbonate (FEC) form a more flexible, LiF-rich SEI on silicon and remain common even with void engineering (Etacheri et al., 2012).

# Cited Sources
- Liu, N. et al. A pomegranate-inspired nanoscale design for large-volume-change lithium battery anodes. Nat. Nanotechnol. 9, 187–192 (2014). doi:10.1038/nnano.2014.6
- Etacheri, V. et al. Effect of Fluoroethylene Carbonate (FEC) on the Performance and Surface Chemistry of Si-Nanowire Li-Ion Battery Anodes. Langmuir 28, 965–976 (2012). doi:10.1021/la203712s"],
            "Largely yes at the particle level: the pomegranate design keeps the outer SEI intact and retained 97 % of capacity after 1,000 cycles with 99.87 % coulombic efficiency (Liu et al., 2014). Its weak point is volumetric: the void space lowers tap density, so areal loadings of about 3.7 mAh/cm² are reachable but volumetric energy density lags graphite. An open question is whether FEC additives are still needed.",
        ),
        turn(
            "Switching topics: what is the levelized cost of storage of vanadium flow batteries versus Li-ion for 8-hour discharge?",
            &[r"## Synthesis: levelized cost of storage (LCOS)

Schmidt et al. (2019) project LCOS for nine technologies across twelve applications. For long-duration discharge, vanadium redox flow batteries (VRFB) become competitive with lithium-ion from about 8 hours, because energy capacity is added as electrolyte rather than as cells. Their 2030 projection puts lithium-ion at 0.15–0.20 $/kWh for daily cycling, with VRFB close behind for 8–12 h durations.

Electrolyte makes up 30–40 % of VRFB system cost at vanadium pentoxide prices near 7 $/lb, which ties LCOS to a volatile commodity (Skyllas-Kazacos et al., 2011). Round-trip efficiency is 65–75 % for VRFB against 85–90 % for lithium-ion.

# Cited Sources
1. Schmidt, O., Melchior, S., Hawkes, A. & Staffell, I. Projecting the Future Levelized Cost of Electricity Storage Technologies. Joule 3, 81–100 (2019). https://doi.org/10.1016/j.joule.2018.12.008
2. Skyllas-Kazacos, M. et al. Progress in Flow Battery Research and Development. J. Electrochem. Soc. 158, R55 (2011). doi:10.1149/1.3599565"],
            "For 8-hour discharge the two are close: Schmidt et al. (2019) find VRFB competitive with lithium-ion from about 8 h, with lithium-ion at 0.15–0.20 $/kWh by 2030. VRFB trades a lower round-trip efficiency (65–75 % versus 85–90 %) for cheap added duration. The electrolyte, 30–40 % of system cost, is the main cost risk.",
        ),
    ]
}

/// Turns 4–6: flow-battery sensitivity, then long-context language models.
pub fn second_block() -> Vec<ResearchTurn> {
    vec![
        turn(
            "How sensitive is flow-battery LCOS to the electrolyte price?",
            &[r"## Synthesis: electrolyte cost sensitivity

Darling et al. (2014) derive the cost floor of aqueous and nonaqueous flow batteries from active-material price, cell voltage and area-specific resistance. To reach a system price of 100 $/kWh, aqueous chemistries need active materials below about 5 $/kg. A doubling of the vanadium price raises VRFB capital cost by roughly 25 %, which leasing the electrolyte can hedge.

# Cited Sources
1. Darling, R. M., Gallagher, K. G., Kowalski, J. A., Ha, S. & Brushett, F. R. Pathways to low-cost electrochemical energy storage: a comparison of aqueous and nonaqueous flow batteries. Energy Environ. Sci. 7, 3459–3477 (2014). doi:10.1039/C4EE02158D
2. Schmidt, O., Melchior, S., Hawkes, A. & Staffell, I. Projecting the Future Levelized Cost of Electricity Storage Technologies. Joule 3, 81–100 (2019). https://doi.org/10.1016/j.joule.2018.12.008"],
            "Very sensitive: doubling the vanadium price raises VRFB capital cost by about 25 %, and a 100 $/kWh system needs active materials below about 5 $/kg (Darling et al., 2014). Electrolyte leasing moves that risk off the balance sheet. This closes the cost comparison; the LCOS ranking of Schmidt et al. (2019) holds for 8-hour storage.",
        ),
        turn(
            "New question: do long-context language models actually use information in the middle of the prompt?",
            &[r"## Synthesis: position effects in long contexts

Liu et al. (2023) found a U-shaped curve in multi-document question answering: accuracy is highest when the relevant passage is at the start or the end of the context and drops by more than 20 % when it sits in the middle, even for models with extended windows (arXiv:2307.03172). Prompt compression such as LLMLingua keeps task accuracy at compression ratios up to 20x on reasoning benchmarks (arXiv:2310.05736).

# Cited Sources
- Liu, N. F. et al. Lost in the Middle: How Language Models Use Long Contexts. TACL (2024). arXiv:2307.03172
- Jiang, H. et al. LLMLingua: Compressing Prompts for Accelerated Inference of Large Language Models. EMNLP (2023). arXiv:2310.05736"],
            "Not reliably: Liu et al. (2023) show a U-shaped accuracy curve, with a drop of more than 20 % when the answer sits mid-context. This argues for summarizing early turns rather than keeping them verbatim in the middle of the prompt. Compression up to 20x keeps accuracy on reasoning tasks (Jiang et al., 2023).",
        ),
        turn(
            "Thanks. Can you list what we still need to check?",
            &[],
            "Open items: whether FEC is still needed with void-engineered silicon, how electrolyte leasing changes VRFB LCOS, and whether rolling summaries lose citations over many compactions.",
        ),
    ]
}
