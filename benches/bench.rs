//! mcpsum benchmarks (placeholder, filled in by the benchmark work).
fn main() {}
