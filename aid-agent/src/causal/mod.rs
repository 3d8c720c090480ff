//! The causal engine: AC-DAG, GIWP, Branch-Prune, causal path discovery,
//! TAGT, and the oracles they query (AID Sec. 4-5).
