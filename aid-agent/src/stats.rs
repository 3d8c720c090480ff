//! Statistical debugging: precision, recall, CBI scores (AID Sec. 2).
