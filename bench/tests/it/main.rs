//! weir-bench's integration tests: one binary. They need `scripts/setup.sh` to have run (the
//! models under `.weir/`).

mod cli;
mod common;
mod serf;
