//! Predicate extraction over recorded runs (AID Sec. 3.1, Fig. 2).
