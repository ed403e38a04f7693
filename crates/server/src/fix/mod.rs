//! The FIX gateway: FIX 4.2, 4.4 and FIXT.1.1/5.0SP2 sessions on one port, bound to venue
//! users, speaking to the same pipeline as the binary gateway (docs/fix.md).

pub mod instruments;
pub mod market_data;
pub mod orders;
