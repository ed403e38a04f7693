use crate::msg::ErrorCode;

/// Why a frame could not be decoded.
///
/// The variants that know where the bad frame ends carry `frame_len` (the whole frame, length
/// field included), so that a server can answer with an Error, skip the frame and go on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The length field exceeds the limit for this direction. The stream cannot be trusted.
    #[error("frame length {len} exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    /// The length field is below 2, too short for version and type.
    #[error("frame length below 2")]
    TooShort,
    #[error("unsupported protocol version {version}")]
    UnsupportedVersion { version: u8, frame_len: usize },
    #[error("unknown frame type {ty}")]
    UnknownType { ty: u8, frame_len: usize },
    /// A body that does not fit its type: `field` names the first field found wrong, or is
    /// "trailing bytes".
    #[error("malformed frame: {field}")]
    Malformed {
        field: &'static str,
        frame_len: usize,
    },
}

impl WireError {
    /// The error code a server sends back for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            WireError::TooLarge { .. } => ErrorCode::TooLarge,
            WireError::TooShort | WireError::Malformed { .. } => ErrorCode::Malformed,
            WireError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            WireError::UnknownType { .. } => ErrorCode::UnknownType,
        }
    }

    /// `Some(n)` when the bad frame's boundary is known: it is the first `n` bytes of the
    /// buffer, and the stream can continue after them. `None` when the stream cannot be
    /// resynchronised and the connection must be closed.
    pub fn frame_len(&self) -> Option<usize> {
        match *self {
            WireError::TooLarge { .. } | WireError::TooShort => None,
            WireError::UnsupportedVersion { frame_len, .. }
            | WireError::UnknownType { frame_len, .. }
            | WireError::Malformed { frame_len, .. } => Some(frame_len),
        }
    }
}
