//! Rialto's binary protocol: length-prefixed, little-endian, versioned frames.
//!
//! A frame is `u32 LE length` (the number of bytes after the length field), then `u8 version`
//! ([`PROTOCOL_VERSION`]), `u8 type`, then a fixed little-endian body per type; variable parts
//! (names, secrets, lists, text) carry their own length prefix. The byte layout of every frame
//! is in `docs/protocol.md`.
//!
//! Encoding appends one whole frame to a caller-owned `Vec<u8>` and allocates nothing else.
//! Decoding reads one frame from the start of a buffer, never panics, and tells a caller that
//! needs more bytes (`Ok(None)`) apart from a broken stream ([`WireError::frame_len`] is `None`)
//! and from a bad frame that can be skipped (`Some(len)`).
//!
//! ```
//! use rialto_wire::{ClientMsg, decode_client, encode_client};
//!
//! let mut out = Vec::new();
//! encode_client(&ClientMsg::Heartbeat { nonce: 7 }, &mut out);
//! let (msg, used) = decode_client(&out).unwrap().unwrap();
//! assert_eq!(msg, ClientMsg::Heartbeat { nonce: 7 });
//! assert_eq!(used, out.len());
//! assert_eq!(decode_client(&out[..used - 1]).unwrap(), None);
//! ```
#![forbid(unsafe_code)]

mod codec;
mod display;
mod error;
mod msg;

pub use codec::{
    MAX_BOOK_LEVELS, MAX_ERROR_MESSAGE, MAX_REPORT_BALANCES, MAX_REPORT_EXT_ORDERS,
    MAX_REPORT_MARGINS, MAX_REPORT_ORDERS, MAX_REPORT_POSITIONS, MAX_SYMBOL_LIST_ITEMS,
    MAX_USER_LIST_ITEMS, MAX_VENUE_CURRENCIES, decode_client, decode_server, encode_client,
    encode_server,
};
pub use error::WireError;
pub use msg::{
    ClientMsg, ErrorCode, Liquidity, Margin, NewOrder, OrderState, RequestKind, Secret, ServerMsg,
};

/// The version byte of every frame this crate writes and the only one it reads.
pub const PROTOCOL_VERSION: u8 = 1;
/// Largest length value (bytes after the length field) of a client → server frame.
pub const MAX_CLIENT_FRAME: usize = 256;
/// Largest length value (bytes after the length field) of a server → client frame.
pub const MAX_SERVER_FRAME: usize = 1 << 20;
/// Bytes before the body: `u32` length, `u8` version, `u8` type.
pub const HEADER_LEN: usize = 6;
