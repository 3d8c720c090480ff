//! Our default strategy. It runs the paper's Alg. 3 skeleton (Branch-Prune,
//! then GIWP) with every deduction the knowledge store allows.

use super::{CausalError, branch_prune, engine::Experiment, giwp};

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    branch_prune::run(ex)?;
    giwp::run_all(ex)
}
