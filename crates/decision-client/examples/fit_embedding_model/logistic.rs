//! The head's fit: weighted L2 logistic regression by Newton's method, then Platt scaling
//! with a research-context shift.

use decision_client::offline::sigmoid;

use crate::store::Row;

/// Newton iterations at most (it converges in about ten).
const STEPS: usize = 50;

/// A fitted head: weights, bias, Platt's A and B.
pub(crate) struct Head {
    pub(crate) w: Vec<f64>,
    pub(crate) b: f64,
    pub(crate) a: f64,
    /// Platt's shift in a research context.
    pub(crate) pc: f64,
    pub(crate) pb: f64,
    /// The research prior's shift of the logit, chosen inside the training folds
    /// ([`crate::nested`]); 0 until chosen.
    pub(crate) shift: f64,
    /// The research block's penalty the head was fitted with (reported).
    pub(crate) research_l2: f64,
}

impl Head {
    pub(crate) fn z(w: &[f64], b: f64, x: &[f64]) -> f64 {
        b + w.iter().zip(x).map(|(wi, xi)| wi * xi).sum::<f64>()
    }

    pub(crate) fn p(&self, r: &Row, x: fn(&Row) -> &[f64]) -> f64 {
        sigmoid(self.logit(r, x) + self.shift * r.research)
    }

    /// The calibrated logit, before the research prior's shift.
    pub(crate) fn logit(&self, r: &Row, x: fn(&Row) -> &[f64]) -> f64 {
        self.a * Self::z(&self.w, self.b, x(r)) + self.pc * r.research + self.pb
    }

    /// Logistic regression on `fit` (the L2 penalty `l2[i]` on weight i), then Platt on
    /// `calibrate`; `x` picks the features.
    pub(crate) fn fit(fit: &[Row], calibrate: &[Row], x: fn(&Row) -> &[f64], l2: &[f64]) -> Head {
        let rows: Vec<(Vec<f64>, f64, f64)> = fit
            .iter()
            .map(|r| (x(r).to_vec(), f64::from(u8::from(r.y)), r.w))
            .collect();
        let (b, w) = newton(&rows, l2);
        let zs: Vec<(Vec<f64>, f64, f64)> = calibrate
            .iter()
            .map(|r| {
                (
                    vec![Self::z(&w, b, x(r)), r.research],
                    f64::from(u8::from(r.y)),
                    r.w,
                )
            })
            .collect();
        let (pb, a) = newton(&zs, &[1e-6, 1e-6]);
        Head {
            w,
            b,
            a: a[0],
            pc: a[1],
            pb,
            shift: 0.0,
            research_l2: 0.0,
        }
    }
}

/// Weighted L2 logistic regression by Newton's method (the bias is not penalized):
/// minimizes Σ wᵢ·loss(yᵢ, σ(b + w·xᵢ)) / Σ wᵢ + Σⱼ λⱼ/2·wⱼ². Returns (b, w).
fn newton(rows: &[(Vec<f64>, f64, f64)], l2: &[f64]) -> (f64, Vec<f64>) {
    let d = rows[0].0.len() + 1;
    let n: f64 = rows.iter().map(|r| r.2).sum();
    let mut theta = vec![0.0f64; d];
    for _ in 0..STEPS {
        let mut g = vec![0.0f64; d];
        let mut h = vec![vec![0.0f64; d]; d];
        for (xs, y, wt) in rows {
            let xa: Vec<f64> = std::iter::once(1.0).chain(xs.iter().copied()).collect();
            let z: f64 = theta.iter().zip(&xa).map(|(t, v)| t * v).sum();
            let p = sigmoid(z);
            let (e, s) = ((p - y) * wt / n, p * (1.0 - p) * wt / n);
            for i in 0..d {
                g[i] += e * xa[i];
                for j in 0..d {
                    h[i][j] += s * xa[i] * xa[j];
                }
            }
        }
        for (i, l) in (1..d).zip(l2) {
            g[i] += l * theta[i];
            h[i][i] += l;
        }
        let step = solve(h, g);
        let mut moved = 0.0f64;
        for (t, s) in theta.iter_mut().zip(&step) {
            *t -= s;
            moved = moved.max(s.abs());
        }
        if moved < 1e-9 {
            break;
        }
    }
    (theta[0], theta[1..].to_vec())
}

/// Solves h·s = g by Gaussian elimination with partial pivoting.
fn solve(mut h: Vec<Vec<f64>>, mut g: Vec<f64>) -> Vec<f64> {
    let d = g.len();
    for c in 0..d {
        let p = (c..d)
            .max_by(|&a, &b| h[a][c].abs().total_cmp(&h[b][c].abs()))
            .unwrap_or(c);
        h.swap(c, p);
        g.swap(c, p);
        let pivot = if h[c][c].abs() < 1e-12 {
            1e-12
        } else {
            h[c][c]
        };
        for r in c + 1..d {
            let f = h[r][c] / pivot;
            let pivot_row = h[c].clone();
            for (x, p) in h[r].iter_mut().zip(&pivot_row).skip(c) {
                *x -= f * p;
            }
            g[r] -= f * g[c];
        }
    }
    let mut s = vec![0.0f64; d];
    for c in (0..d).rev() {
        let rest: f64 = (c + 1..d).map(|k| h[c][k] * s[k]).sum();
        let pivot = if h[c][c].abs() < 1e-12 {
            1e-12
        } else {
            h[c][c]
        };
        s[c] = (g[c] - rest) / pivot;
    }
    s
}
