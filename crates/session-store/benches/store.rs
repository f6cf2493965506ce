//! Store benchmarks (being written).
use criterion::{Criterion, criterion_group, criterion_main};
fn nothing(_: &mut Criterion) {}
criterion_group!(benches, nothing);
criterion_main!(benches);
