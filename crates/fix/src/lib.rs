//! FIX for Rialto: the tag=value codec, data dictionaries, and the session layer.
//!
//! - [`parse`] finds whole messages in a receive buffer (BeginString, BodyLength and CheckSum
//!   verified) and walks their fields where they lie: no allocation, no map.
//! - [`build`] writes a message straight into a send buffer, BodyLength and CheckSum included.
//! - [`decimal`] and [`time`] convert FIX prices, quantities and timestamps exactly.
//! - [`dict`] holds the data dictionaries of FIX 4.0, 4.1, 4.2, 4.3, 4.4 and of FIX 5.0,
//!   5.0SP1 and 5.0SP2 over FIXT 1.1, and validates messages against them.
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

/// The FIX versions Rialto speaks, as a session's BeginString names them. Each (CompID,
/// version) pair is a session of its own. FIX 5.0, 5.0SP1 and 5.0SP2 run over the FIXT.1.1
/// session layer: which of them a FIXT.1.1 session's application messages are in is an
/// [`ApplVersion`], named by the Logon and by each message, not part of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    Fix40,
    Fix41,
    Fix42,
    Fix43,
    Fix44,
    Fixt11,
}

impl Version {
    /// Every version, oldest first.
    pub const ALL: [Version; 6] = [
        Version::Fix40,
        Version::Fix41,
        Version::Fix42,
        Version::Fix43,
        Version::Fix44,
        Version::Fixt11,
    ];

    pub fn begin_string(self) -> &'static [u8] {
        self.name().as_bytes()
    }

    pub fn from_begin_string(text: &[u8]) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.begin_string() == text)
    }

    pub fn name(self) -> &'static str {
        match self {
            Version::Fix40 => "FIX.4.0",
            Version::Fix41 => "FIX.4.1",
            Version::Fix42 => "FIX.4.2",
            Version::Fix43 => "FIX.4.3",
            Version::Fix44 => "FIX.4.4",
            Version::Fixt11 => "FIXT.1.1",
        }
    }

    /// The application version of a FIX 4.x session: its own. `None` for FIXT.1.1, where the
    /// Logon's DefaultApplVerID (1137) and each message's ApplVerID (1128) name it.
    pub fn appl_version(self) -> Option<ApplVersion> {
        match self {
            Version::Fix40 => Some(ApplVersion::Fix40),
            Version::Fix41 => Some(ApplVersion::Fix41),
            Version::Fix42 => Some(ApplVersion::Fix42),
            Version::Fix43 => Some(ApplVersion::Fix43),
            Version::Fix44 => Some(ApplVersion::Fix44),
            Version::Fixt11 => None,
        }
    }
}

/// The version of application messages: the data dictionary they are checked against and the
/// fields Rialto writes in them. FIX 4.x messages travel under their own BeginString; FIX 5.0,
/// 5.0SP1 and 5.0SP2 ones under FIXT.1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApplVersion {
    Fix40,
    Fix41,
    Fix42,
    Fix43,
    Fix44,
    Fix50,
    Fix50Sp1,
    Fix50Sp2,
}

impl ApplVersion {
    /// Every application version, oldest first.
    pub const ALL: [ApplVersion; 8] = [
        ApplVersion::Fix40,
        ApplVersion::Fix41,
        ApplVersion::Fix42,
        ApplVersion::Fix43,
        ApplVersion::Fix44,
        ApplVersion::Fix50,
        ApplVersion::Fix50Sp1,
        ApplVersion::Fix50Sp2,
    ];

    /// The session layer the messages travel on.
    pub fn session_version(self) -> Version {
        match self {
            ApplVersion::Fix40 => Version::Fix40,
            ApplVersion::Fix41 => Version::Fix41,
            ApplVersion::Fix42 => Version::Fix42,
            ApplVersion::Fix43 => Version::Fix43,
            ApplVersion::Fix44 => Version::Fix44,
            ApplVersion::Fix50 | ApplVersion::Fix50Sp1 | ApplVersion::Fix50Sp2 => Version::Fixt11,
        }
    }

    /// The BeginString its messages carry.
    pub fn begin_string(self) -> &'static [u8] {
        self.session_version().begin_string()
    }

    /// The ApplVerID (1128) and DefaultApplVerID (1137) value that names the version.
    pub fn appl_ver_id(self) -> &'static [u8] {
        match self {
            ApplVersion::Fix40 => b"2",
            ApplVersion::Fix41 => b"3",
            ApplVersion::Fix42 => b"4",
            ApplVersion::Fix43 => b"5",
            ApplVersion::Fix44 => b"6",
            ApplVersion::Fix50 => b"7",
            ApplVersion::Fix50Sp1 => b"8",
            ApplVersion::Fix50Sp2 => b"9",
        }
    }

    /// The version an ApplVerID (1128) or DefaultApplVerID (1137) names on a FIXT.1.1
    /// session: 7 (FIX 5.0), 8 (5.0SP1) or 9 (5.0SP2). FIX 4.x application messages over
    /// FIXT.1.1 (2 to 6) are not offered: `None`, like any other value.
    pub fn over_fixt(appl_ver_id: &[u8]) -> Option<ApplVersion> {
        match appl_ver_id {
            b"7" => Some(ApplVersion::Fix50),
            b"8" => Some(ApplVersion::Fix50Sp1),
            b"9" => Some(ApplVersion::Fix50Sp2),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ApplVersion::Fix50 => "FIX.5.0",
            ApplVersion::Fix50Sp1 => "FIX.5.0SP1",
            ApplVersion::Fix50Sp2 => "FIX.5.0SP2",
            other => other.session_version().name(),
        }
    }
}
