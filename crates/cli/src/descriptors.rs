//! The descriptor budget of `compaction serve`: how many connections the process can hold.
//!
//! Every connection costs a file descriptor. With the common soft limit of 1,024, a few hundred
//! idle sockets exhaust it, and a cap that the limit cannot honour means that new clients wait
//! behind idle ones. So `serve` raises its soft `RLIMIT_NOFILE` to the hard limit at start (as
//! Go's runtime and most servers do; the hard limit is the operator's bound and is never
//! exceeded), and the connection cap is at most what the budget leaves after [`RESERVE`]
//! descriptors for the store, the database pool, the coordinator's and exporter's sockets and
//! the standard streams. A cap lowered this way is said in the banner, never silently.

/// Descriptors kept for everything but client connections.
pub(crate) const RESERVE: u64 = 256;

/// The process's descriptor limit after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The soft limit now in force (`None`: unlimited).
    pub(crate) soft: Option<u64>,
    /// The soft limit before, when `raise` changed it.
    pub(crate) raised_from: Option<u64>,
}

/// Raises the soft descriptor limit to the hard one (when the system allows; otherwise the
/// limit stays as it was).
pub(crate) fn raise() -> Budget {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current.is_some() && limit.current != limit.maximum {
            let wanted = rustix::process::Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            if setrlimit(Resource::Nofile, wanted).is_ok() {
                return Budget {
                    soft: limit.maximum,
                    raised_from: limit.current,
                };
            }
        }
        Budget {
            soft: limit.current,
            raised_from: None,
        }
    }
    #[cfg(not(unix))]
    Budget {
        soft: None,
        raised_from: None,
    }
}

/// The connection cap `requested` within `budget`, and the banner's note when it was lowered.
pub(crate) fn connection_cap(requested: usize, budget: Budget) -> (usize, Option<String>) {
    let Some(soft) = budget.soft else {
        return (requested, None);
    };
    let room = usize::try_from(soft.saturating_sub(RESERVE).max(1)).unwrap_or(usize::MAX);
    if requested <= room {
        return (requested, None);
    }
    let note = format!(
        "--max-connections {requested} lowered to {room}: the process may open {soft} files \
         (ulimit -n; {RESERVE} are kept for the store and the upstream sockets)"
    );
    (room, Some(note))
}

/// The banner's line about connections.
pub(crate) fn banner(cap: usize, budget: Budget, note: Option<&str>) -> String {
    let limit = match (budget.soft, budget.raised_from) {
        (Some(soft), Some(from)) => format!("file limit raised from {from} to {soft}"),
        (Some(soft), None) => format!("file limit {soft}"),
        (None, _) => "no file limit".to_owned(),
    };
    match note {
        Some(note) => format!("connections: at most {cap} ({limit}); {note}"),
        None => format!("connections: at most {cap} ({limit})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_within_the_budget_is_kept_and_one_beyond_it_is_lowered_with_a_note() {
        let budget = Budget {
            soft: Some(1_024),
            raised_from: None,
        };
        assert_eq!(connection_cap(512, budget), (512, None));
        let (cap, note) = connection_cap(4_096, budget);
        assert_eq!(cap, 768);
        let note = note.expect("a lowered cap is said");
        assert!(
            note.contains("--max-connections 4096 lowered to 768"),
            "{note}"
        );
        let unlimited = Budget {
            soft: None,
            raised_from: None,
        };
        assert_eq!(connection_cap(100_000, unlimited), (100_000, None));
        let tiny = Budget {
            soft: Some(10),
            raised_from: None,
        };
        assert_eq!(connection_cap(4, tiny).0, 1);
    }

    #[test]
    fn the_banner_says_where_the_limit_came_from() {
        let raised = Budget {
            soft: Some(20_000),
            raised_from: Some(1_024),
        };
        assert_eq!(
            banner(4_096, raised, None),
            "connections: at most 4096 (file limit raised from 1024 to 20000)"
        );
    }
}
