//! Application messages Rialto reads and writes, decoded in one pass over a [`Frame`]'s fields
//! and encoded straight into a [`MessageWriter`].
//!
//! Decoders check what the venue needs to act (required fields present, numbers well formed);
//! the data dictionary ([`crate::dict`]) checks the rest of the standard before them.

use crate::decimal::Decimal;
use crate::parse::{Field, FieldError, Frame, parse_int};
use crate::{ApplVersion, MessageWriter, dict, tags};

/// Why an application message cannot be acted on: a session Reject with this
/// SessionRejectReason and tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub reason: u32,
    pub ref_tag: u32,
    pub text: &'static str,
}

/// SessionRejectReason (373) values, as the session layer defines them.
pub use crate::session::reject_reason;

use reject_reason::*;

const fn missing(tag: u32, text: &'static str) -> Invalid {
    Invalid {
        reason: REQUIRED_TAG_MISSING,
        ref_tag: tag,
        text,
    }
}

const fn bad_format(tag: u32, text: &'static str) -> Invalid {
    Invalid {
        reason: INCORRECT_DATA_FORMAT,
        ref_tag: tag,
        text,
    }
}

impl From<dict::Violation> for Invalid {
    fn from(v: dict::Violation) -> Invalid {
        Invalid {
            reason: v.reason,
            ref_tag: v.ref_tag.unwrap_or(0),
            text: v.text,
        }
    }
}

fn field_error(e: FieldError) -> Invalid {
    match e {
        FieldError::InvalidTag => Invalid {
            reason: INVALID_TAG_NUMBER,
            ref_tag: 0,
            text: "Invalid tag number",
        },
        FieldError::NoValue(tag) => Invalid {
            reason: TAG_WITHOUT_VALUE,
            ref_tag: tag,
            text: "Tag specified without a value",
        },
    }
}

fn one_char(field: Field<'_>) -> Result<u8, Invalid> {
    match field.value {
        [c] => Ok(*c),
        _ => Err(bad_format(field.tag, "expected a single character")),
    }
}

fn decimal(field: Field<'_>) -> Result<Decimal, Invalid> {
    Decimal::parse(field.value).map_err(|_| bad_format(field.tag, "expected a decimal number"))
}

fn timestamp(field: Field<'_>) -> Result<i64, Invalid> {
    crate::time::parse_utc_timestamp(field.value)
        .ok_or(bad_format(field.tag, "expected a UTCTimestamp"))
}

fn int(field: Field<'_>) -> Result<i64, Invalid> {
    parse_int(field.value).ok_or(bad_format(field.tag, "expected an integer"))
}

/// NewOrderSingle (D).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrderSingle<'a> {
    pub cl_ord_id: &'a [u8],
    pub symbol: &'a [u8],
    pub side: u8,
    pub ord_type: u8,
    pub price: Option<Decimal>,
    pub order_qty: Decimal,
    /// Absent means Day (FIX's default).
    pub time_in_force: Option<u8>,
    pub exec_inst: Option<&'a [u8]>,
    pub account: Option<&'a [u8]>,
    /// StopPx (99): stop (OrdType 3) and stop-limit (4) orders.
    pub stop_px: Option<Decimal>,
    /// ExpireTime (126), ns since the Unix epoch: a GTD order (TimeInForce 6).
    pub expire_time: Option<i64>,
    /// The displayed quantity of an iceberg: DisplayQty (1138), else MaxFloor (111), with the
    /// tag it came in (reports echo it there).
    pub display_qty: Option<(ShownQtyTag, Decimal)>,
}

impl<'a> NewOrderSingle<'a> {
    /// Decodes without the data dictionary (see [`NewOrderSingle::decode_validated`]).
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        // Values are read as they are met here, which is faster than keeping them as text for
        // `finish` as the validating pass does (a property test holds the two to the same
        // results).
        let (mut cl_ord_id, mut symbol, mut side, mut ord_type) = (None, None, None, None);
        let (mut price, mut order_qty, mut time_in_force) = (None, None, None);
        let (mut exec_inst, mut account) = (None, None);
        let (mut stop_px, mut expire_time, mut display_qty, mut max_floor) =
            (None, None, None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::STOP_PX => stop_px = Some(decimal(field)?),
                tags::EXPIRE_TIME => expire_time = Some(timestamp(field)?),
                tags::DISPLAY_QTY => {
                    display_qty = Some((ShownQtyTag::DisplayQty, decimal(field)?));
                }
                tags::MAX_FLOOR => max_floor = Some((ShownQtyTag::MaxFloor, decimal(field)?)),
                tags::CL_ORD_ID => cl_ord_id = Some(field.value),
                tags::SYMBOL => symbol = Some(field.value),
                tags::SIDE => side = Some(one_char(field)?),
                tags::ORD_TYPE => ord_type = Some(one_char(field)?),
                tags::PRICE => price = Some(decimal(field)?),
                tags::ORDER_QTY => order_qty = Some(decimal(field)?),
                tags::TIME_IN_FORCE => time_in_force = Some(one_char(field)?),
                tags::EXEC_INST => exec_inst = Some(field.value),
                tags::ACCOUNT => account = Some(field.value),
                _ => {}
            }
        }
        Ok(NewOrderSingle {
            cl_ord_id: cl_ord_id.ok_or(missing(tags::CL_ORD_ID, "ClOrdID is required"))?,
            symbol: symbol.ok_or(missing(tags::SYMBOL, "Symbol is required"))?,
            side: side.ok_or(missing(tags::SIDE, "Side is required"))?,
            ord_type: ord_type.ok_or(missing(tags::ORD_TYPE, "OrdType is required"))?,
            price,
            order_qty: order_qty.ok_or(missing(tags::ORDER_QTY, "OrderQty is required"))?,
            time_in_force,
            exec_inst,
            account,
            stop_px,
            expire_time,
            display_qty: display_qty.or(max_floor),
        })
    }

    /// Checks the message against the data dictionary of `version` ([`dict::validate`]) and
    /// decodes it in the same pass over its fields.
    pub fn decode_validated(version: ApplVersion, frame: &Frame<'a>) -> Result<Self, Invalid> {
        Self::decode_validated_with(version, frame, dict::Options::default())
    }

    /// [`NewOrderSingle::decode_validated`] with validation `options`.
    pub fn decode_validated_with(
        version: ApplVersion,
        frame: &Frame<'a>,
        options: dict::Options,
    ) -> Result<Self, Invalid> {
        let mut fields = NewOrderSingleFields::default();
        dict::validate_fields_with(version, frame, options, &mut fields)?;
        fields.finish()
    }

    /// ExecInst 6 (participate, do not initiate) asks for a post-only order.
    pub fn post_only(&self) -> bool {
        self.exec_inst
            .is_some_and(|v| v.split(|&b| b == b' ').any(|word| word == b"6"))
    }
}

/// A NewOrderSingle's fields as the validating walk meets them; they are read and checked
/// once all are in (which keeps `Visit::field` small enough to inline into the walk).
#[derive(Default)]
struct NewOrderSingleFields<'a> {
    cl_ord_id: Option<&'a [u8]>,
    symbol: Option<&'a [u8]>,
    side: Option<&'a [u8]>,
    ord_type: Option<&'a [u8]>,
    price: Option<&'a [u8]>,
    order_qty: Option<&'a [u8]>,
    time_in_force: Option<&'a [u8]>,
    exec_inst: Option<&'a [u8]>,
    account: Option<&'a [u8]>,
    stop_px: Option<&'a [u8]>,
    expire_time: Option<&'a [u8]>,
    display_qty: Option<&'a [u8]>,
    max_floor: Option<&'a [u8]>,
}

impl<'a> dict::Visit<'a> for NewOrderSingleFields<'a> {
    #[inline(always)]
    fn field(&mut self, field: Field<'a>) {
        let slot = match field.tag {
            tags::CL_ORD_ID => &mut self.cl_ord_id,
            tags::SYMBOL => &mut self.symbol,
            tags::SIDE => &mut self.side,
            tags::ORD_TYPE => &mut self.ord_type,
            tags::PRICE => &mut self.price,
            tags::ORDER_QTY => &mut self.order_qty,
            tags::TIME_IN_FORCE => &mut self.time_in_force,
            tags::EXEC_INST => &mut self.exec_inst,
            tags::ACCOUNT => &mut self.account,
            tags::STOP_PX => &mut self.stop_px,
            tags::EXPIRE_TIME => &mut self.expire_time,
            tags::DISPLAY_QTY => &mut self.display_qty,
            tags::MAX_FLOOR => &mut self.max_floor,
            _ => return,
        };
        *slot = Some(field.value);
    }
}

impl<'a> NewOrderSingleFields<'a> {
    fn finish(self) -> Result<NewOrderSingle<'a>, Invalid> {
        let field = |tag, value: Option<&'a [u8]>| value.map(|value| Field { tag, value });
        let required = |tag, value: Option<&'a [u8]>, text| value.ok_or(missing(tag, text));
        let char_of = |tag, value, text| {
            one_char(Field {
                tag,
                value: required(tag, value, text)?,
            })
        };
        Ok(NewOrderSingle {
            cl_ord_id: required(tags::CL_ORD_ID, self.cl_ord_id, "ClOrdID is required")?,
            symbol: required(tags::SYMBOL, self.symbol, "Symbol is required")?,
            side: char_of(tags::SIDE, self.side, "Side is required")?,
            ord_type: char_of(tags::ORD_TYPE, self.ord_type, "OrdType is required")?,
            price: field(tags::PRICE, self.price).map(decimal).transpose()?,
            order_qty: decimal(Field {
                tag: tags::ORDER_QTY,
                value: required(tags::ORDER_QTY, self.order_qty, "OrderQty is required")?,
            })?,
            time_in_force: field(tags::TIME_IN_FORCE, self.time_in_force)
                .map(one_char)
                .transpose()?,
            exec_inst: self.exec_inst,
            account: self.account,
            stop_px: field(tags::STOP_PX, self.stop_px)
                .map(decimal)
                .transpose()?,
            expire_time: field(tags::EXPIRE_TIME, self.expire_time)
                .map(timestamp)
                .transpose()?,
            display_qty: match (self.display_qty, self.max_floor) {
                (Some(v), _) => Some((ShownQtyTag::DisplayQty, v, tags::DISPLAY_QTY)),
                (None, Some(v)) => Some((ShownQtyTag::MaxFloor, v, tags::MAX_FLOOR)),
                (None, None) => None,
            }
            .map(|(which, value, tag)| decimal(Field { tag, value }).map(|d| (which, d)))
            .transpose()?,
        })
    }
}

/// OrderCancelRequest (F).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderCancelRequest<'a> {
    pub cl_ord_id: &'a [u8],
    pub orig_cl_ord_id: &'a [u8],
    pub order_id: Option<&'a [u8]>,
    pub symbol: Option<&'a [u8]>,
    pub side: Option<u8>,
}

impl<'a> OrderCancelRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let (mut cl_ord_id, mut orig, mut order_id, mut symbol, mut side) =
            (None, None, None, None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::CL_ORD_ID => cl_ord_id = Some(field.value),
                tags::ORIG_CL_ORD_ID => orig = Some(field.value),
                tags::ORDER_ID => order_id = Some(field.value),
                tags::SYMBOL => symbol = Some(field.value),
                tags::SIDE => side = Some(one_char(field)?),
                _ => {}
            }
        }
        Ok(OrderCancelRequest {
            cl_ord_id: cl_ord_id.ok_or(missing(tags::CL_ORD_ID, "ClOrdID is required"))?,
            orig_cl_ord_id: orig.ok_or(missing(tags::ORIG_CL_ORD_ID, "OrigClOrdID is required"))?,
            order_id,
            symbol,
            side,
        })
    }
}

/// OrderCancelReplaceRequest (G).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderCancelReplaceRequest<'a> {
    pub cl_ord_id: &'a [u8],
    pub orig_cl_ord_id: &'a [u8],
    pub order_id: Option<&'a [u8]>,
    pub symbol: Option<&'a [u8]>,
    pub side: Option<u8>,
    pub ord_type: Option<u8>,
    pub price: Option<Decimal>,
    pub order_qty: Option<Decimal>,
    pub time_in_force: Option<u8>,
    /// StopPx (99): a pending stop's new trigger price.
    pub stop_px: Option<Decimal>,
    /// ExpireTime (126), ns since the Unix epoch.
    pub expire_time: Option<i64>,
}

impl<'a> OrderCancelReplaceRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let mut m = OrderCancelReplaceRequest {
            cl_ord_id: b"",
            orig_cl_ord_id: b"",
            order_id: None,
            symbol: None,
            side: None,
            ord_type: None,
            price: None,
            order_qty: None,
            time_in_force: None,
            stop_px: None,
            expire_time: None,
        };
        let (mut cl_ord_id, mut orig) = (None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::CL_ORD_ID => cl_ord_id = Some(field.value),
                tags::ORIG_CL_ORD_ID => orig = Some(field.value),
                tags::ORDER_ID => m.order_id = Some(field.value),
                tags::SYMBOL => m.symbol = Some(field.value),
                tags::SIDE => m.side = Some(one_char(field)?),
                tags::ORD_TYPE => m.ord_type = Some(one_char(field)?),
                tags::PRICE => m.price = Some(decimal(field)?),
                tags::ORDER_QTY => m.order_qty = Some(decimal(field)?),
                tags::TIME_IN_FORCE => m.time_in_force = Some(one_char(field)?),
                tags::STOP_PX => m.stop_px = Some(decimal(field)?),
                tags::EXPIRE_TIME => m.expire_time = Some(timestamp(field)?),
                _ => {}
            }
        }
        m.cl_ord_id = cl_ord_id.ok_or(missing(tags::CL_ORD_ID, "ClOrdID is required"))?;
        m.orig_cl_ord_id = orig.ok_or(missing(tags::ORIG_CL_ORD_ID, "OrigClOrdID is required"))?;
        Ok(m)
    }
}

/// OrderStatusRequest (H).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderStatusRequest<'a> {
    pub cl_ord_id: &'a [u8],
    pub order_id: Option<&'a [u8]>,
    pub symbol: Option<&'a [u8]>,
    pub side: Option<u8>,
}

impl<'a> OrderStatusRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let (mut cl_ord_id, mut order_id, mut symbol, mut side) = (None, None, None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::CL_ORD_ID => cl_ord_id = Some(field.value),
                tags::ORDER_ID => order_id = Some(field.value),
                tags::SYMBOL => symbol = Some(field.value),
                tags::SIDE => side = Some(one_char(field)?),
                _ => {}
            }
        }
        Ok(OrderStatusRequest {
            cl_ord_id: cl_ord_id.ok_or(missing(tags::CL_ORD_ID, "ClOrdID is required"))?,
            order_id,
            symbol,
            side,
        })
    }
}

/// OrderMassCancelRequest (q).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderMassCancelRequest<'a> {
    pub cl_ord_id: &'a [u8],
    /// 1: the orders in one security (`symbol`); 7: all orders.
    pub request_type: u8,
    pub symbol: Option<&'a [u8]>,
}

impl<'a> OrderMassCancelRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let (mut cl_ord_id, mut request_type, mut symbol) = (None, None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::CL_ORD_ID => cl_ord_id = Some(field.value),
                tags::MASS_CANCEL_REQUEST_TYPE => request_type = Some(one_char(field)?),
                tags::SYMBOL => symbol = Some(field.value),
                _ => {}
            }
        }
        Ok(OrderMassCancelRequest {
            cl_ord_id: cl_ord_id.ok_or(missing(tags::CL_ORD_ID, "ClOrdID is required"))?,
            request_type: request_type.ok_or(missing(
                tags::MASS_CANCEL_REQUEST_TYPE,
                "MassCancelRequestType is required",
            ))?,
            symbol,
        })
    }
}

/// The most symbols one MarketDataRequest may name.
pub const MAX_MD_SYMBOLS: usize = 16;

/// MarketDataRequest (V).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarketDataRequest<'a> {
    pub md_req_id: &'a [u8],
    /// 0: snapshot; 1: snapshot and updates; 2: unsubscribe.
    pub subscription_request_type: u8,
    /// 0: full book; N: the best N levels.
    pub market_depth: i64,
    pub bids_and_offers: bool,
    pub trades: bool,
    pub symbols: [&'a [u8]; MAX_MD_SYMBOLS],
    pub symbol_count: usize,
}

impl<'a> MarketDataRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let mut m = MarketDataRequest {
            md_req_id: b"",
            subscription_request_type: 0,
            market_depth: 0,
            bids_and_offers: false,
            trades: false,
            symbols: [b""; MAX_MD_SYMBOLS],
            symbol_count: 0,
        };
        let (mut req_id, mut sub_type, mut depth) = (None, None, None);
        let (mut entry_types_declared, mut entry_types_seen) = (None, 0i64);
        let mut symbols_declared = None;
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::MD_REQ_ID => req_id = Some(field.value),
                tags::SUBSCRIPTION_REQUEST_TYPE => sub_type = Some(one_char(field)?),
                tags::MARKET_DEPTH => depth = Some(int(field)?),
                tags::NO_MD_ENTRY_TYPES => entry_types_declared = Some(int(field)?),
                tags::MD_ENTRY_TYPE => {
                    entry_types_seen += 1;
                    match one_char(field)? {
                        b'0' | b'1' => m.bids_and_offers = true,
                        b'2' => m.trades = true,
                        _ => {
                            return Err(Invalid {
                                reason: VALUE_INCORRECT,
                                ref_tag: tags::MD_ENTRY_TYPE,
                                text: "only bids (0), offers (1) and trades (2) are published",
                            });
                        }
                    }
                }
                tags::NO_RELATED_SYM => symbols_declared = Some(int(field)?),
                tags::SYMBOL => {
                    if m.symbol_count == MAX_MD_SYMBOLS {
                        return Err(Invalid {
                            reason: VALUE_INCORRECT,
                            ref_tag: tags::NO_RELATED_SYM,
                            text: "too many symbols in one request",
                        });
                    }
                    m.symbols[m.symbol_count] = field.value;
                    m.symbol_count += 1;
                }
                _ => {}
            }
        }
        m.md_req_id = req_id.ok_or(missing(tags::MD_REQ_ID, "MDReqID is required"))?;
        m.subscription_request_type = sub_type.ok_or(missing(
            tags::SUBSCRIPTION_REQUEST_TYPE,
            "SubscriptionRequestType is required",
        ))?;
        m.market_depth = depth.unwrap_or(0);
        let group_count = |tag| Invalid {
            reason: INCORRECT_NUM_IN_GROUP,
            ref_tag: tag,
            text: "the group count does not match its entries",
        };
        if m.subscription_request_type != b'2' {
            if entry_types_declared.is_none() {
                return Err(missing(
                    tags::NO_MD_ENTRY_TYPES,
                    "NoMDEntryTypes is required",
                ));
            }
            if symbols_declared.is_none() {
                return Err(missing(tags::NO_RELATED_SYM, "NoRelatedSym is required"));
            }
        }
        if entry_types_declared.is_some_and(|n| n != entry_types_seen) {
            return Err(group_count(tags::NO_MD_ENTRY_TYPES));
        }
        if symbols_declared.is_some_and(|n| n != m.symbol_count as i64) {
            return Err(group_count(tags::NO_RELATED_SYM));
        }
        Ok(m)
    }

    pub fn symbols(&self) -> &[&'a [u8]] {
        &self.symbols[..self.symbol_count]
    }
}

/// SecurityListRequest (x).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecurityListRequest<'a> {
    pub security_req_id: &'a [u8],
    pub request_type: u8,
    pub symbol: Option<&'a [u8]>,
}

impl<'a> SecurityListRequest<'a> {
    pub fn decode(frame: &Frame<'a>) -> Result<Self, Invalid> {
        let (mut req_id, mut request_type, mut symbol) = (None, None, None);
        for field in frame.fields() {
            let field = field.map_err(field_error)?;
            match field.tag {
                tags::SECURITY_REQ_ID => req_id = Some(field.value),
                tags::SECURITY_LIST_REQUEST_TYPE => request_type = Some(one_char(field)?),
                tags::SYMBOL => symbol = Some(field.value),
                _ => {}
            }
        }
        Ok(SecurityListRequest {
            security_req_id: req_id
                .ok_or(missing(tags::SECURITY_REQ_ID, "SecurityReqID is required"))?,
            request_type: request_type.ok_or(missing(
                tags::SECURITY_LIST_REQUEST_TYPE,
                "SecurityListRequestType is required",
            ))?,
            symbol,
        })
    }
}

/// ExecType (150) values Rialto sends.
pub mod exec_type {
    pub const NEW: u8 = b'0';
    pub const CANCELED: u8 = b'4';
    pub const REPLACED: u8 = b'5';
    pub const REJECTED: u8 = b'8';
    /// FIX 4.3 and later; FIX 4.1 and 4.2 report fills as 1 (partial fill) or 2 (fill).
    pub const TRADE: u8 = b'F';
    /// FIX 4.3 and later; FIX 4.1 and 4.2 give the order's status.
    pub const ORDER_STATUS: u8 = b'I';
    /// An order that ended at its expiry time (GTD, DAY).
    pub const EXPIRED: u8 = b'C';
    /// Triggered or activated by system (FIX 5.0 and later): a stop order triggered. Older
    /// versions have no such value: see [`super::triggered_exec_type`].
    pub const TRIGGERED: u8 = b'L';
    /// Restated (FIX 4.2 and later): an unsolicited report, with ExecRestatementReason (378).
    pub const RESTATED: u8 = b'D';
}

/// ExecRestatementReason (378) values Rialto sends.
pub mod exec_restatement_reason {
    /// Broker option (FIX 4.2's closest to a venue's own decision).
    pub const BROKER_OPTION: u32 = 4;
    /// Market (Exchange) option (FIX 4.3 and later).
    pub const MARKET_OPTION: u32 = 8;
}

/// How `version` reports a stop order that triggered: its ExecType and, for Restated, its
/// ExecRestatementReason; `None` where the version has no report for it (FIX 4.0 and 4.1:
/// the fills that follow tell it). ExecType L (Triggered or activated by system) came with
/// FIX 5.0; FIX 4.2 to 4.4 report the order Restated (D), which their ExecType defines as an
/// unsolicited report of the sell side, with the reason the version offers: 4 (broker
/// option) in FIX 4.2, 8 (market, i.e. exchange, option) from FIX 4.3.
pub fn triggered_exec_type(version: ApplVersion) -> Option<(u8, Option<u32>)> {
    use exec_restatement_reason::*;
    match version {
        ApplVersion::Fix40 | ApplVersion::Fix41 => None,
        ApplVersion::Fix42 => Some((exec_type::RESTATED, Some(BROKER_OPTION))),
        ApplVersion::Fix43 | ApplVersion::Fix44 => Some((exec_type::RESTATED, Some(MARKET_OPTION))),
        ApplVersion::Fix50 | ApplVersion::Fix50Sp1 | ApplVersion::Fix50Sp2 => {
            Some((exec_type::TRIGGERED, None))
        }
    }
}

/// The tag an iceberg's shown quantity came in: DisplayQty (1138, FIX 5.0 on) or MaxFloor
/// (111). Reports echo it in the same tag, where their version's ExecutionReport has it
/// (MaxFloor from FIX 4.2, DisplayQty from FIX 5.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShownQtyTag {
    DisplayQty,
    MaxFloor,
}

impl ShownQtyTag {
    pub fn tag(self) -> u32 {
        match self {
            ShownQtyTag::DisplayQty => tags::DISPLAY_QTY,
            ShownQtyTag::MaxFloor => tags::MAX_FLOOR,
        }
    }

    /// Whether an ExecutionReport of `version` has this field.
    pub fn in_execution_report(self, version: ApplVersion) -> bool {
        match self {
            ShownQtyTag::DisplayQty => version >= ApplVersion::Fix50,
            ShownQtyTag::MaxFloor => version >= ApplVersion::Fix42,
        }
    }
}

/// OrdStatus (39) values.
pub mod ord_status {
    pub const NEW: u8 = b'0';
    pub const PARTIALLY_FILLED: u8 = b'1';
    pub const FILLED: u8 = b'2';
    pub const CANCELED: u8 = b'4';
    pub const REJECTED: u8 = b'8';
    pub const EXPIRED: u8 = b'C';
}

/// An ExecutionReport (8), written field by field into the message.
#[derive(Clone, Copy, Debug)]
pub struct ExecutionReport<'a> {
    /// The venue's order id; "NONE" style text is allowed for rejections.
    pub order_id: &'a [u8],
    pub exec_id: &'a [u8],
    pub cl_ord_id: &'a [u8],
    pub orig_cl_ord_id: Option<&'a [u8]>,
    pub exec_type: u8,
    pub ord_status: u8,
    pub symbol: &'a [u8],
    pub side: u8,
    pub ord_type: Option<u8>,
    pub time_in_force: Option<u8>,
    pub price: Option<Decimal>,
    pub order_qty: Option<Decimal>,
    /// The fill, for ExecType Trade.
    pub last: Option<(Decimal, Decimal)>,
    pub leaves_qty: Decimal,
    pub cum_qty: Decimal,
    pub avg_px: Decimal,
    pub ord_rej_reason: Option<u32>,
    pub transact_time_ns: i64,
    pub text: Option<&'a [u8]>,
    /// StopPx (99) of a stop or stop-limit order.
    pub stop_px: Option<Decimal>,
    /// An iceberg's shown quantity, in the tag the client sent it in.
    pub shown_qty: Option<(ShownQtyTag, Decimal)>,
    /// ExpireTime (126) of a GTD order, ns since the Unix epoch.
    pub expire_time_ns: Option<i64>,
}

impl ExecutionReport<'_> {
    /// Writes the report with the fields `version` defines for it, and no others:
    /// - ExecTransType (20) up to FIX 4.2 (3, status, answering an OrderStatusRequest);
    /// - ExecType (150) from FIX 4.1, where fills and status answers are 1/2 or the order's
    ///   status until FIX 4.3 brings F (Trade) and I (Order status);
    /// - OrigClOrdID (41) and LeavesQty (151) from FIX 4.1;
    /// - OrdRejReason (103) only for a value the version defines (the Text says more);
    /// - FIX 4.0 and 4.1 require OrderQty, LastShares (32) and LastPx (31): 0 when none;
    /// - TransactTime to the second in FIX 4.0 and 4.1;
    /// - quantities in FIX 4.0 and 4.1 are integers (shares): a whole one is written without
    ///   its decimals ("2", not "2.000"), and one that is not whole as it is (docs/fix.md);
    /// - the order's own terms on every report: OrdType, TimeInForce, StopPx, ExpireTime, and
    ///   the shown quantity of an iceberg where the version's report has its tag;
    /// - a triggered stop as [`triggered_exec_type`] says (the caller sends no report where
    ///   it says `None`).
    pub fn write(&self, version: ApplVersion, w: &mut MessageWriter<'_>) {
        let qty = |q: Decimal| {
            if version <= ApplVersion::Fix41 {
                without_trailing_zeros(q)
            } else {
                q
            }
        };
        w.str(tags::ORDER_ID, self.order_id);
        w.str(tags::EXEC_ID, self.exec_id);
        if version <= ApplVersion::Fix42 {
            let status = self.exec_type == exec_type::ORDER_STATUS;
            w.char(tags::EXEC_TRANS_TYPE, if status { b'3' } else { b'0' });
        }
        // Empty for an order the session did not send (a liquidation's close): left out, as
        // every version allows.
        if !self.cl_ord_id.is_empty() {
            w.str(tags::CL_ORD_ID, self.cl_ord_id);
        }
        if let Some(orig) = self.orig_cl_ord_id
            && version >= ApplVersion::Fix41
        {
            w.str(tags::ORIG_CL_ORD_ID, orig);
        }
        if version >= ApplVersion::Fix41 {
            let exec_type = match self.exec_type {
                // No Trade or Order status exec type before FIX 4.3: the order's status.
                exec_type::TRADE | exec_type::ORDER_STATUS if version <= ApplVersion::Fix42 => {
                    self.ord_status
                }
                exec_type::TRIGGERED => {
                    triggered_exec_type(version).map_or(exec_type::TRIGGERED, |(t, _)| t)
                }
                t => t,
            };
            w.char(tags::EXEC_TYPE, exec_type);
            if self.exec_type == exec_type::TRIGGERED
                && let Some((_, Some(reason))) = triggered_exec_type(version)
            {
                w.uint(tags::EXEC_RESTATEMENT_REASON, u64::from(reason));
            }
        }
        w.char(tags::ORD_STATUS, self.ord_status);
        if let Some(reason) = self.ord_rej_reason
            && defines_value(version, tags::ORD_REJ_REASON, reason)
        {
            w.uint(tags::ORD_REJ_REASON, u64::from(reason));
        }
        w.str(tags::SYMBOL, self.symbol);
        w.char(tags::SIDE, self.side);
        if let Some(t) = self.ord_type {
            w.char(tags::ORD_TYPE, t);
        }
        if let Some(p) = self.price {
            w.decimal(tags::PRICE, p);
        }
        let zero = Decimal::new(0, 0);
        let old = version <= ApplVersion::Fix41;
        match self.order_qty {
            Some(q) => {
                w.decimal(tags::ORDER_QTY, qty(q));
            }
            None if old => {
                w.decimal(tags::ORDER_QTY, zero);
            }
            None => {}
        }
        if let Some(t) = self.time_in_force {
            w.char(tags::TIME_IN_FORCE, t);
        }
        if let Some(p) = self.stop_px {
            w.decimal(tags::STOP_PX, p);
        }
        if let Some(ts) = self.expire_time_ns {
            w.timestamp_in(version.session_version(), tags::EXPIRE_TIME, ts);
        }
        if let Some((tag, shown)) = self.shown_qty
            && tag.in_execution_report(version)
        {
            w.decimal(tag.tag(), qty(shown));
        }
        match self.last {
            Some((px, last_qty)) => {
                w.decimal(tags::LAST_PX, px);
                w.decimal(tags::LAST_QTY, qty(last_qty));
            }
            None if old => {
                w.decimal(tags::LAST_PX, zero);
                w.decimal(tags::LAST_QTY, zero);
            }
            None => {}
        }
        if version >= ApplVersion::Fix41 {
            w.decimal(tags::LEAVES_QTY, qty(self.leaves_qty));
        }
        w.decimal(tags::CUM_QTY, qty(self.cum_qty));
        w.decimal(tags::AVG_PX, self.avg_px);
        w.timestamp_in(
            version.session_version(),
            tags::TRANSACT_TIME,
            self.transact_time_ns,
        );
        if let Some(text) = self.text {
            w.str(tags::TEXT, text);
        }
    }
}

fn without_trailing_zeros(mut d: Decimal) -> Decimal {
    while d.scale > 0 && d.mantissa % 10 == 0 {
        d.mantissa /= 10;
        d.scale -= 1;
    }
    d
}

/// Whether `version` defines this value of an integer enum field. For the reasons of
/// rejections only (a dictionary lookup; they are not on the hot path).
#[cold]
fn defines_value(version: ApplVersion, tag: u32, value: u32) -> bool {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    dict::field(version, tag).is_some_and(|f| f.allows(&digits[at..]))
}

/// CxlRejReason (102) values.
pub mod cxl_rej_reason {
    pub const TOO_LATE_TO_CANCEL: u32 = 0;
    pub const UNKNOWN_ORDER: u32 = 1;
    pub const BROKER_OPTION: u32 = 2;
    pub const DUPLICATE_CL_ORD_ID: u32 = 6;
    pub const OTHER: u32 = 99;
}

/// OrderCancelReject (9).
#[derive(Clone, Copy, Debug)]
pub struct OrderCancelReject<'a> {
    pub order_id: &'a [u8],
    pub cl_ord_id: &'a [u8],
    pub orig_cl_ord_id: &'a [u8],
    pub ord_status: u8,
    /// 1: a cancel request; 2: a cancel/replace request.
    pub response_to: u8,
    pub reason: u32,
    pub text: &'a [u8],
}

impl OrderCancelReject<'_> {
    /// Writes the reject with the fields `version` defines for it: OrigClOrdID (41) and
    /// OrdStatus (39) from FIX 4.1, CxlRejResponseTo (434) from FIX 4.2, and CxlRejReason
    /// (102) only for a value the version defines (the Text says more).
    pub fn write(&self, version: ApplVersion, w: &mut MessageWriter<'_>) {
        w.str(tags::ORDER_ID, self.order_id)
            .str(tags::CL_ORD_ID, self.cl_ord_id);
        if version >= ApplVersion::Fix41 {
            w.str(tags::ORIG_CL_ORD_ID, self.orig_cl_ord_id)
                .char(tags::ORD_STATUS, self.ord_status);
        }
        if defines_value(version, tags::CXL_REJ_REASON, self.reason) {
            w.uint(tags::CXL_REJ_REASON, u64::from(self.reason));
        }
        if version >= ApplVersion::Fix42 {
            w.char(tags::CXL_REJ_RESPONSE_TO, self.response_to);
        }
        w.str(tags::TEXT, self.text);
    }
}

/// BusinessRejectReason (380) values, as the session layer defines them.
pub use crate::session::business_reject_reason;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::next_frame;

    fn frame_bytes(msg_type: &[u8], body: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type);
        w.raw(body.replace('|', "\u{1}").as_bytes());
        w.finish();
        out
    }

    #[test]
    fn a_new_order_single_decodes() {
        let bytes = frame_bytes(
            b"D",
            "34=2|49=TRADER1|56=RIALTO|52=20261122-10:00:00.000|11=A1|55=BTC-USD|54=1|\
             60=20261122-10:00:00.000|38=0.005|40=2|44=100.25|59=1|18=6|",
        );
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let nos = NewOrderSingle::decode(&frame).unwrap();
        assert_eq!(nos.cl_ord_id, b"A1");
        assert_eq!(nos.symbol, b"BTC-USD");
        assert_eq!(nos.side, b'1');
        assert_eq!(nos.price, Some(Decimal::new(10025, 2)));
        assert_eq!(nos.order_qty, Decimal::new(5, 3));
        assert!(nos.post_only());
        assert_eq!(
            NewOrderSingle::decode_validated(ApplVersion::Fix44, &frame),
            Ok(nos)
        );
    }

    #[test]
    fn a_new_order_single_is_validated_while_decoded() {
        let header = "34=2|49=TRADER1|56=RIALTO|52=20261122-10:00:00.000|";
        let decode = |body: &str| {
            let bytes = frame_bytes(b"D", &format!("{header}{body}"));
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            NewOrderSingle::decode_validated(ApplVersion::Fix44, &frame)
                .map(|nos| nos.order_qty)
                .map_err(|e| (e.reason, e.ref_tag))
        };
        let good = "11=A1|55=BTC-USD|54=1|60=20261122-10:00:00|38=2|40=2|44=1|";
        assert_eq!(decode(good), Ok(Decimal::new(2, 0)));
        // A Side that FIX 4.4 does not define: the dictionary's verdict.
        let bad_side = "11=A1|55=BTC-USD|54=Z|60=20261122-10:00:00|38=2|40=2|44=1|";
        assert_eq!(decode(bad_side), Err((VALUE_INCORRECT, tags::SIDE)));
        // OrderQty is optional in the dictionary but required to trade.
        let no_qty = "11=A1|55=BTC-USD|54=1|60=20261122-10:00:00|40=2|44=1|";
        assert_eq!(decode(no_qty), Err((REQUIRED_TAG_MISSING, tags::ORDER_QTY)));
        // Well formed for the dictionary, too large for an exact decimal.
        let huge = "11=A1|55=BTC-USD|54=1|60=20261122-10:00:00|38=99999999999999999999|40=2|";
        assert_eq!(decode(huge), Err((INCORRECT_DATA_FORMAT, tags::ORDER_QTY)));
    }

    #[test]
    fn missing_and_malformed_fields_are_named() {
        let bytes = frame_bytes(b"D", "34=2|11=A1|54=1|38=1|40=2|");
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let err = NewOrderSingle::decode(&frame).unwrap_err();
        assert_eq!(
            (err.reason, err.ref_tag),
            (REQUIRED_TAG_MISSING, tags::SYMBOL)
        );

        let bytes = frame_bytes(b"D", "34=2|11=A1|55=X|54=1|38=1x|40=2|");
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let err = NewOrderSingle::decode(&frame).unwrap_err();
        assert_eq!(
            (err.reason, err.ref_tag),
            (INCORRECT_DATA_FORMAT, tags::ORDER_QTY)
        );
    }

    #[test]
    fn market_data_request_groups_are_counted() {
        let ok = "262=R1|263=1|264=5|267=2|269=0|269=1|146=2|55=BTC-USD|55=ETH-USD|";
        let bytes = frame_bytes(b"V", ok);
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let m = MarketDataRequest::decode(&frame).unwrap();
        assert_eq!(m.symbols(), &[&b"BTC-USD"[..], &b"ETH-USD"[..]]);
        assert!(m.bids_and_offers && !m.trades);

        let bad = "262=R1|263=1|264=5|267=3|269=0|269=1|146=1|55=BTC-USD|";
        let bytes = frame_bytes(b"V", bad);
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let err = MarketDataRequest::decode(&frame).unwrap_err();
        assert_eq!(err.reason, INCORRECT_NUM_IN_GROUP);
    }

    #[test]
    fn an_execution_report_is_written_per_version() {
        let er = ExecutionReport {
            order_id: b"42",
            exec_id: b"71",
            cl_ord_id: b"A1",
            orig_cl_ord_id: None,
            exec_type: exec_type::TRADE,
            ord_status: ord_status::PARTIALLY_FILLED,
            symbol: b"BTC-USD",
            side: b'1',
            ord_type: Some(b'2'),
            time_in_force: None,
            price: Some(Decimal::new(10000, 2)),
            // Whole quantities: FIX 4.0 and 4.1 have integer ones.
            order_qty: Some(Decimal::new(10_000, 3)),
            last: Some((Decimal::new(10000, 2), Decimal::new(4_000, 3))),
            leaves_qty: Decimal::new(6_000, 3),
            cum_qty: Decimal::new(4_000, 3),
            avg_px: Decimal::new(10000, 2),
            ord_rej_reason: None,
            transact_time_ns: 0,
            text: None,
            stop_px: None,
            shown_qty: None,
            expire_time_ns: None,
        };
        let expected_exec_type = |v: ApplVersion| match v {
            ApplVersion::Fix40 => None,
            ApplVersion::Fix41 | ApplVersion::Fix42 => Some(&b"1"[..]),
            _ => Some(&b"F"[..]),
        };
        for version in ApplVersion::ALL {
            let frame_bytes = written(version, b"8", |w| er.write(version, w));
            let (frame, _) = next_frame(&frame_bytes, 4096).unwrap().unwrap();
            assert_eq!(frame.get(tags::EXEC_TYPE), expected_exec_type(version));
            let leaves = match version {
                ApplVersion::Fix40 => None,
                ApplVersion::Fix41 => Some(&b"6"[..]),
                _ => Some(&b"6.000"[..]),
            };
            assert_eq!(frame.get(tags::LEAVES_QTY), leaves);
            assert_eq!(
                frame.get(tags::EXEC_TRANS_TYPE).is_some(),
                version <= ApplVersion::Fix42
            );
            assert_eq!(dict::validate(version, &frame), Ok(()), "{version:?}");
        }
    }

    /// A stop-limit iceberg GTD order's reports echo its terms in every version, each field
    /// only where the version's ExecutionReport has it; a triggered stop is L from FIX 5.0,
    /// Restated with its reason in FIX 4.2 to 4.4.
    #[test]
    fn reports_echo_the_orders_terms_and_triggers_per_version() {
        for shown_tag in [ShownQtyTag::MaxFloor, ShownQtyTag::DisplayQty] {
            for exec_type in [exec_type::NEW, exec_type::TRIGGERED, exec_type::EXPIRED] {
                let er = ExecutionReport {
                    order_id: b"42",
                    exec_id: b"71",
                    cl_ord_id: b"A1",
                    orig_cl_ord_id: None,
                    exec_type,
                    ord_status: if exec_type == exec_type::EXPIRED {
                        ord_status::EXPIRED
                    } else {
                        ord_status::NEW
                    },
                    symbol: b"BTC-USD",
                    side: b'1',
                    ord_type: Some(b'4'),
                    time_in_force: Some(b'6'),
                    price: Some(Decimal::new(10100, 2)),
                    order_qty: Some(Decimal::new(10_000, 3)),
                    last: None,
                    leaves_qty: Decimal::new(10_000, 3),
                    cum_qty: Decimal::new(0, 3),
                    avg_px: Decimal::new(0, 2),
                    ord_rej_reason: None,
                    transact_time_ns: 1_700_000_000_000_000_000,
                    text: None,
                    stop_px: Some(Decimal::new(10000, 2)),
                    shown_qty: Some((shown_tag, Decimal::new(2_000, 3))),
                    expire_time_ns: Some(1_700_000_060_000_000_000),
                };
                for version in ApplVersion::ALL {
                    let triggered = exec_type == exec_type::TRIGGERED;
                    if triggered && triggered_exec_type(version).is_none() {
                        assert!(version <= ApplVersion::Fix41);
                        continue;
                    }
                    let bytes = written(version, b"8", |w| er.write(version, w));
                    let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
                    let what = format!("{version:?} {shown_tag:?} {}", exec_type as char);
                    assert_eq!(dict::validate(version, &frame), Ok(()), "{what}");
                    assert_eq!(frame.get(tags::ORD_TYPE), Some(&b"4"[..]), "{what}");
                    assert_eq!(frame.get(tags::TIME_IN_FORCE), Some(&b"6"[..]), "{what}");
                    assert_eq!(frame.get(tags::STOP_PX), Some(&b"100.00"[..]), "{what}");
                    let expire = if version <= ApplVersion::Fix41 {
                        &b"20231114-22:14:20"[..]
                    } else {
                        &b"20231114-22:14:20.000"[..]
                    };
                    assert_eq!(frame.get(tags::EXPIRE_TIME), Some(expire), "{what}");
                    let (other, has) = match shown_tag {
                        ShownQtyTag::MaxFloor => (tags::DISPLAY_QTY, version >= ApplVersion::Fix42),
                        ShownQtyTag::DisplayQty => (tags::MAX_FLOOR, version >= ApplVersion::Fix50),
                    };
                    let shown = frame.get(shown_tag.tag());
                    assert_eq!(shown.is_some(), has, "{what}");
                    if has {
                        assert_eq!(shown, Some(&b"2.000"[..]), "{what}");
                    }
                    assert_eq!(frame.get(other), None, "{what}");
                    let (want_type, want_reason) = match (triggered, version) {
                        (false, ApplVersion::Fix40) => (None, None),
                        (false, _) => (Some(vec![exec_type]), None),
                        (true, ApplVersion::Fix42) => (Some(b"D".to_vec()), Some(&b"4"[..])),
                        (true, ApplVersion::Fix43 | ApplVersion::Fix44) => {
                            (Some(b"D".to_vec()), Some(&b"8"[..]))
                        }
                        (true, _) => (Some(b"L".to_vec()), None),
                    };
                    assert_eq!(
                        frame.get(tags::EXEC_TYPE).map(<[u8]>::to_vec),
                        want_type,
                        "{what}"
                    );
                    assert_eq!(
                        frame.get(tags::EXEC_RESTATEMENT_REASON),
                        want_reason,
                        "{what}"
                    );
                }
            }
        }
    }

    /// A message with a full standard header, as a session writes it.
    fn written(
        version: ApplVersion,
        msg_type: &[u8],
        body: impl FnOnce(&mut MessageWriter<'_>),
    ) -> Vec<u8> {
        let session = version.session_version();
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, session.begin_string(), msg_type);
        w.str(tags::SENDER_COMP_ID, b"RIALTO")
            .str(tags::TARGET_COMP_ID, b"TRADER1")
            .uint(tags::MSG_SEQ_NUM, 1)
            .timestamp_in(session, tags::SENDING_TIME, 1_700_000_000_123_000_000);
        body(&mut w);
        w.finish();
        out
    }

    #[test]
    fn rejections_carry_only_what_each_version_defines() {
        let rejected = ExecutionReport {
            order_id: b"NONE",
            exec_id: b"72",
            cl_ord_id: b"A2",
            orig_cl_ord_id: Some(b"A1"),
            exec_type: exec_type::REJECTED,
            ord_status: ord_status::REJECTED,
            symbol: b"BTC-USD",
            side: b'2',
            ord_type: None,
            time_in_force: Some(b'3'),
            price: None,
            order_qty: None,
            last: None,
            leaves_qty: Decimal::new(0, 0),
            cum_qty: Decimal::new(0, 0),
            avg_px: Decimal::new(0, 0),
            // Unsupported order characteristic: FIX 4.3 on.
            ord_rej_reason: Some(11),
            transact_time_ns: 1_700_000_000_123_000_000,
            text: Some(b"unsupported"),
            stop_px: None,
            shown_qty: None,
            expire_time_ns: None,
        };
        let cancel_reject = OrderCancelReject {
            order_id: b"42",
            cl_ord_id: b"C1",
            orig_cl_ord_id: b"A1",
            ord_status: ord_status::FILLED,
            response_to: b'1',
            // Other: FIX 4.4 on.
            reason: cxl_rej_reason::OTHER,
            text: b"no",
        };
        for version in ApplVersion::ALL {
            let bytes = written(version, b"8", |w| rejected.write(version, w));
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            assert_eq!(dict::validate(version, &frame), Ok(()), "{version:?} 8");
            assert_eq!(
                frame.get(tags::ORD_REJ_REASON).is_some(),
                version >= ApplVersion::Fix43,
                "{version:?}"
            );
            assert_eq!(
                frame.get(tags::ORDER_QTY).is_some(),
                version <= ApplVersion::Fix41
            );
            let transact_time = frame.get(tags::TRANSACT_TIME).unwrap();
            assert_eq!(
                transact_time.len(),
                if version <= ApplVersion::Fix41 {
                    17
                } else {
                    21
                }
            );

            let bytes = written(version, b"9", |w| cancel_reject.write(version, w));
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            assert_eq!(dict::validate(version, &frame), Ok(()), "{version:?} 9");
            assert_eq!(
                frame.get(tags::CXL_REJ_REASON).is_some(),
                version >= ApplVersion::Fix44
            );
            assert_eq!(
                frame.get(tags::ORIG_CL_ORD_ID).is_some(),
                version >= ApplVersion::Fix41
            );
        }
    }
}
