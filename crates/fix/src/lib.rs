//! FIX for Rialto: the tag=value codec, data dictionaries, and the session layer.
//!
//! - [`parse`] finds whole messages in a receive buffer (BeginString, BodyLength and CheckSum
//!   verified) and walks their fields where they lie: no allocation, no map.
//! - [`build`] writes a message straight into a send buffer, BodyLength and CheckSum included.
//! - [`decimal`] and [`time`] convert FIX prices, quantities and timestamps exactly.
//! - [`dict`] holds the FIX 4.2, 4.4 and 5.0SP2/FIXT 1.1 data dictionaries and validates
//!   messages against them.
//! - [`app`] decodes the application messages the venue acts on and writes its reports.
//! - [`session`] is the session layer: a pure state machine, its message store and log.
#![forbid(unsafe_code)]

pub mod app;
pub mod build;
pub mod decimal;
pub mod dict;
pub mod parse;
pub mod samples;
pub mod session;
pub mod tags;
pub mod time;

pub use build::MessageWriter;
pub use decimal::Decimal;
pub use parse::{Field, FieldError, Fields, Frame, Garbled, next_frame};

/// The field separator.
pub const SOH: u8 = 0x01;

/// The FIX versions Rialto speaks. FIX 5.0SP2 runs over the FIXT.1.1 session layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    Fix42,
    Fix44,
    Fixt11,
}

impl Version {
    pub fn begin_string(self) -> &'static [u8] {
        match self {
            Version::Fix42 => b"FIX.4.2",
            Version::Fix44 => b"FIX.4.4",
            Version::Fixt11 => b"FIXT.1.1",
        }
    }

    pub fn from_begin_string(text: &[u8]) -> Option<Version> {
        match text {
            b"FIX.4.2" => Some(Version::Fix42),
            b"FIX.4.4" => Some(Version::Fix44),
            b"FIXT.1.1" => Some(Version::Fixt11),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Version::Fix42 => "FIX.4.2",
            Version::Fix44 => "FIX.4.4",
            Version::Fixt11 => "FIXT.1.1",
        }
    }
}
