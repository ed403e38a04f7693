//! The canonical binary encoding of a [`Command`] (docs/journal-format.md, "Command").
//!
//! One `u8` tag, then the variant's fields at fixed places, little-endian: `i64`/`u32` as is,
//! an `Option<enum>` as the enum's `code()` or 255 for `None`, an `Option<i64>` price as a flag
//! byte (0 or 1) and 8 bytes (zero when the flag is 0), a `bool` as 0 or 1, a `Name` as one
//! length byte and that many bytes of UTF-8. Every command has exactly one encoding: decoding
//! rejects anything else (unknown codes, flags other than 0/1, trailing bytes) so that a record
//! whose CRC is right but whose bytes are not a command is reported, never guessed at.
//!
//! Adding a variant: a new tag constant, one arm in `encode_command`, one in `decode_command`,
//! and one line in docs/journal-format.md. Tags are never reused.

use rialto_core::{
    AmendOrder, Command, Name, OrderExtras, OrderType, Phase, PlaceOrder, Side, Stp, SymbolId,
    SymbolKind, SymbolSpec, Tif,
};

use crate::JournalError;

const TAG_ADD_SYMBOL: u8 = 1;
const TAG_ADD_USER: u8 = 2;
const TAG_ADJUST_BALANCE: u8 = 3;
const TAG_PLACE: u8 = 4;
const TAG_CANCEL: u8 = 5;
const TAG_MOVE: u8 = 6;
const TAG_REDUCE: u8 = 7;
const TAG_BOOK: u8 = 8;
const TAG_USER_REPORT: u8 = 9;
const TAG_VENUE_REPORT: u8 = 10;
const TAG_MASS_CANCEL: u8 = 11;
const TAG_TICK: u8 = 12;
const TAG_AMEND: u8 = 13;
const TAG_SET_ORDER_ID_WINDOW: u8 = 14;
/// A `place` with at least one of stop_price, display_qty, expire_ts: `place`'s fields, then
/// each of the three as a flag and 8 bytes. A place with none of them keeps [`TAG_PLACE`].
const TAG_PLACE_WITH_EXTRAS: u8 = 15;
/// An `add_symbol` with a band or a day end: tag 1's fields, then band_bps and day_end. One
/// with neither keeps [`TAG_ADD_SYMBOL`].
const TAG_ADD_SYMBOL_WITH_TRADING: u8 = 16;
const TAG_SET_PHASE: u8 = 17;
const TAG_SET_BAND: u8 = 18;
const TAG_SET_REF_PRICE: u8 = 19;
const TAG_SUSPEND_USER: u8 = 20;
const TAG_RESUME_USER: u8 = 21;
/// An `add_symbol` that is not spot (a future, or a type word the gateway did not know): tag
/// 16's fields (band_bps and day_end always), then a kind byte, 1 for a future followed by
/// initial_margin, maintenance_margin and mark_price, or 255 for an unknown type.
const TAG_ADD_SYMBOL_WITH_KIND: u8 = 22;
const TAG_SET_MARK_PRICE: u8 = 23;
const TAG_FUND_INSURANCE: u8 = 24;
/// The kind byte of a future under [`TAG_ADD_SYMBOL_WITH_KIND`].
const KIND_FUTURE: u8 = 1;

/// Bytes of an encoded `place`: tag, user, order, symbol, side, type, tif, price flag, price,
/// qty, post_only, stp.
const PLACE_LEN: usize = 1 + 8 + 8 + 4 + 3 + 1 + 8 + 8 + 1 + 1;
/// Bytes of an encoded place with extras: the above, then three flags and values.
const PLACE_WITH_EXTRAS_LEN: usize = PLACE_LEN + 3 * 9;

/// The code of an absent (`None`) enum.
const NONE_CODE: u8 = 255;

/// The longest encoding of any command: a future's `add_symbol` with three 23-byte names
/// (1 + 3 * 24 + 6 * 8 + 1 + 3 * 8 = 146), rounded up.
pub const MAX_COMMAND_BYTES: usize = 160;

/// Appends the encoding of `cmd` to `out`. Allocates only if `out` has to grow.
pub fn encode_command(cmd: &Command, out: &mut Vec<u8>) {
    let mut b = [0u8; MAX_COMMAND_BYTES];
    let len = encode_command_into(cmd, &mut b);
    out.extend_from_slice(&b[..len]);
}

/// Writes the encoding of `cmd` at the start of `out` and returns its length. Every byte of
/// the encoding is written: the journal writer reuses its buffer without zeroing it.
#[inline]
pub(crate) fn encode_command_into(cmd: &Command, out: &mut [u8; MAX_COMMAND_BYTES]) -> usize {
    match cmd {
        // The most frequent command: fixed offsets into a fixed-size array, no length checks.
        Command::Place(p) => {
            out[0] = TAG_PLACE;
            out[1..9].copy_from_slice(&p.user.to_le_bytes());
            out[9..17].copy_from_slice(&p.order.to_le_bytes());
            out[17..21].copy_from_slice(&p.symbol.0.to_le_bytes());
            out[21] = p.side.map_or(NONE_CODE, Side::code);
            out[22] = p.order_type.map_or(NONE_CODE, OrderType::code);
            out[23] = p.tif.map_or(NONE_CODE, Tif::code);
            out[24] = p.price.is_some() as u8;
            out[25..33].copy_from_slice(&p.price.unwrap_or(0).to_le_bytes());
            out[33..41].copy_from_slice(&p.qty.to_le_bytes());
            out[41] = p.post_only as u8;
            out[42] = p.stp.map_or(NONE_CODE, Stp::code);
            if p.extras.is_none() {
                return PLACE_LEN;
            }
            out[0] = TAG_PLACE_WITH_EXTRAS;
            let extras = [p.stop_price(), p.display_qty(), p.expire_ts()];
            for (i, field) in extras.into_iter().enumerate() {
                let at = PLACE_LEN + 9 * i;
                out[at] = field.is_some() as u8;
                out[at + 1..at + 9].copy_from_slice(&field.unwrap_or(0).to_le_bytes());
            }
            PLACE_WITH_EXTRAS_LEN
        }
        _ => encode_other(cmd, out),
    }
}

/// Every command but `place`, through a cursor.
#[inline(never)]
fn encode_other(cmd: &Command, out: &mut [u8; MAX_COMMAND_BYTES]) -> usize {
    let mut put = Put { out, len: 0 };
    match *cmd {
        Command::AddSymbol(ref s) => {
            let spot = s.kind == SymbolSpec::SPOT;
            let trading = s.band_bps != 0 || s.day_end != 0 || !spot;
            put.u8(if !spot {
                TAG_ADD_SYMBOL_WITH_KIND
            } else if trading {
                TAG_ADD_SYMBOL_WITH_TRADING
            } else {
                TAG_ADD_SYMBOL
            });
            put.name(&s.symbol);
            put.name(&s.base);
            put.name(&s.quote);
            for v in [s.base_scale, s.quote_scale, s.maker_fee, s.taker_fee] {
                put.i64(v);
            }
            if trading {
                put.i64(s.band_bps);
                put.i64(s.day_end);
            }
            match s.kind {
                Some(SymbolKind::Spot) => {}
                Some(SymbolKind::Future {
                    initial_margin,
                    maintenance_margin,
                    mark_price,
                }) => {
                    put.u8(KIND_FUTURE);
                    put.i64(initial_margin);
                    put.i64(maintenance_margin);
                    put.i64(mark_price);
                }
                None => put.u8(NONE_CODE),
            }
        }
        Command::SetMarkPrice { symbol, price } => {
            put.u8(TAG_SET_MARK_PRICE);
            put.bytes(&symbol.0.to_le_bytes());
            put.i64(price);
        }
        Command::FundInsurance {
            currency,
            amount,
            tx,
        } => {
            put.u8(TAG_FUND_INSURANCE);
            put.name(&currency);
            put.i64(amount);
            put.i64(tx);
        }
        Command::AddUser { user } => {
            put.u8(TAG_ADD_USER);
            put.i64(user);
        }
        Command::AdjustBalance {
            user,
            currency,
            amount,
            tx,
        } => {
            put.u8(TAG_ADJUST_BALANCE);
            put.i64(user);
            put.name(&currency);
            put.i64(amount);
            put.i64(tx);
        }
        Command::Place(_) => unreachable!("encode_command_into encodes place"),
        Command::Cancel { user, order } => {
            put.u8(TAG_CANCEL);
            put.i64(user);
            put.i64(order);
        }
        Command::Move { user, order, price } => {
            put.u8(TAG_MOVE);
            put.i64(user);
            put.i64(order);
            put.i64(price);
        }
        Command::Reduce { user, order, qty } => {
            put.u8(TAG_REDUCE);
            put.i64(user);
            put.i64(order);
            put.i64(qty);
        }
        Command::Book { symbol, depth } => {
            put.u8(TAG_BOOK);
            put.bytes(&symbol.0.to_le_bytes());
            put.i64(depth);
        }
        Command::UserReport { user } => {
            put.u8(TAG_USER_REPORT);
            put.i64(user);
        }
        Command::VenueReport => put.u8(TAG_VENUE_REPORT),
        Command::MassCancel { user, symbol } => {
            // A flag, not a reserved id: `Some(SymbolId::NONE)` (an unknown name) must stay
            // distinct from `None` (every symbol).
            put.u8(TAG_MASS_CANCEL);
            put.i64(user);
            put.u8(u8::from(symbol.is_some()));
            put.bytes(&symbol.map_or(0, |s| s.0).to_le_bytes());
        }
        // The time is the record's own timestamp: the command has no field.
        Command::Tick => put.u8(TAG_TICK),
        Command::SetOrderIdWindow { window } => {
            put.u8(TAG_SET_ORDER_ID_WINDOW);
            put.i64(window);
        }
        Command::Amend(ref a) => {
            put.u8(TAG_AMEND);
            put.i64(a.user);
            put.i64(a.order);
            for field in [a.price(), a.qty(), a.stop_price()] {
                put.u8(u8::from(field.is_some()));
                put.i64(field.unwrap_or(0));
            }
        }
        Command::SetPhase { symbol, phase } => {
            put.u8(TAG_SET_PHASE);
            put.bytes(&symbol.0.to_le_bytes());
            put.u8(phase.map_or(NONE_CODE, Phase::code));
        }
        Command::SetBand { symbol, band_bps } => {
            put.u8(TAG_SET_BAND);
            put.bytes(&symbol.0.to_le_bytes());
            put.i64(band_bps);
        }
        Command::SetRefPrice { symbol, price } => {
            put.u8(TAG_SET_REF_PRICE);
            put.bytes(&symbol.0.to_le_bytes());
            put.i64(price);
        }
        Command::SuspendUser { user } => {
            put.u8(TAG_SUSPEND_USER);
            put.i64(user);
        }
        Command::ResumeUser { user } => {
            put.u8(TAG_RESUME_USER);
            put.i64(user);
        }
    }
    put.len
}

/// Decodes exactly one command that fills all of `bytes`. Never panics.
pub fn decode_command(bytes: &[u8]) -> Result<Command, JournalError> {
    let mut r = Reader { bytes, pos: 0 };
    let cmd = match r.u8("tag")? {
        tag @ (TAG_ADD_SYMBOL | TAG_ADD_SYMBOL_WITH_TRADING | TAG_ADD_SYMBOL_WITH_KIND) => {
            let mut spec = SymbolSpec {
                symbol: r.name("symbol")?,
                base: r.name("base")?,
                quote: r.name("quote")?,
                base_scale: r.i64("base_scale")?,
                quote_scale: r.i64("quote_scale")?,
                maker_fee: r.i64("maker_fee")?,
                taker_fee: r.i64("taker_fee")?,
                band_bps: 0,
                day_end: 0,
                kind: SymbolSpec::SPOT,
            };
            if tag == TAG_ADD_SYMBOL_WITH_TRADING {
                let at = r.pos;
                (spec.band_bps, spec.day_end) = (r.i64("band_bps")?, r.i64("day_end")?);
                if spec.band_bps == 0 && spec.day_end == 0 {
                    return Err(r.bad(at, "no band nor day end under tag 16".into()));
                }
            }
            if tag == TAG_ADD_SYMBOL_WITH_KIND {
                (spec.band_bps, spec.day_end) = (r.i64("band_bps")?, r.i64("day_end")?);
                let at = r.pos;
                spec.kind = match r.u8("symbol kind")? {
                    KIND_FUTURE => Some(SymbolKind::Future {
                        initial_margin: r.i64("initial_margin")?,
                        maintenance_margin: r.i64("maintenance_margin")?,
                        mark_price: r.i64("mark_price")?,
                    }),
                    NONE_CODE => None,
                    other => return Err(r.bad(at, format!("symbol kind {other}"))),
                };
            }
            Command::AddSymbol(Box::new(spec))
        }
        TAG_ADD_USER => Command::AddUser {
            user: r.i64("user")?,
        },
        TAG_ADJUST_BALANCE => Command::AdjustBalance {
            user: r.i64("user")?,
            currency: r.name("currency")?,
            amount: r.i64("amount")?,
            tx: r.i64("tx")?,
        },
        TAG_PLACE => Command::Place(decode_place(&mut r)?),
        TAG_PLACE_WITH_EXTRAS => {
            let place = decode_place(&mut r)?;
            let at = r.pos;
            let extras = OrderExtras::with_fields(
                r.opt_i64("stop_price flag", "stop_price")?,
                r.opt_i64("display_qty flag", "display_qty")?,
                r.opt_i64("expire_ts flag", "expire_ts")?,
            );
            if extras.is_none() {
                return Err(r.bad(at, "no extra field under tag 15".into()));
            }
            Command::Place(PlaceOrder { extras, ..place })
        }
        TAG_CANCEL => Command::Cancel {
            user: r.i64("user")?,
            order: r.i64("order")?,
        },
        TAG_MOVE => Command::Move {
            user: r.i64("user")?,
            order: r.i64("order")?,
            price: r.i64("price")?,
        },
        TAG_REDUCE => Command::Reduce {
            user: r.i64("user")?,
            order: r.i64("order")?,
            qty: r.i64("qty")?,
        },
        TAG_BOOK => Command::Book {
            symbol: SymbolId(r.u32("symbol")?),
            depth: r.i64("depth")?,
        },
        TAG_USER_REPORT => Command::UserReport {
            user: r.i64("user")?,
        },
        TAG_VENUE_REPORT => Command::VenueReport,
        TAG_MASS_CANCEL => {
            let user = r.i64("user")?;
            let flag_at = r.pos;
            let symbol = match (r.u8("symbol flag")?, r.u32("symbol")?) {
                (0, 0) => None,
                (1, id) => Some(SymbolId(id)),
                (f, _) => return Err(r.bad(flag_at, format!("symbol flag {f} with that id"))),
            };
            Command::MassCancel { user, symbol }
        }
        TAG_TICK => Command::Tick,
        TAG_SET_ORDER_ID_WINDOW => Command::SetOrderIdWindow {
            window: r.i64("window")?,
        },
        TAG_AMEND => Command::Amend(AmendOrder::with_fields(
            r.i64("user")?,
            r.i64("order")?,
            r.opt_i64("price flag", "price")?,
            r.opt_i64("qty flag", "qty")?,
            r.opt_i64("stop_price flag", "stop_price")?,
        )),
        TAG_SET_PHASE => Command::SetPhase {
            symbol: SymbolId(r.u32("symbol")?),
            phase: r.code("phase", Phase::from_code)?,
        },
        TAG_SET_BAND => Command::SetBand {
            symbol: SymbolId(r.u32("symbol")?),
            band_bps: r.i64("band_bps")?,
        },
        TAG_SET_REF_PRICE => Command::SetRefPrice {
            symbol: SymbolId(r.u32("symbol")?),
            price: r.i64("price")?,
        },
        TAG_SUSPEND_USER => Command::SuspendUser {
            user: r.i64("user")?,
        },
        TAG_RESUME_USER => Command::ResumeUser {
            user: r.i64("user")?,
        },
        TAG_SET_MARK_PRICE => Command::SetMarkPrice {
            symbol: SymbolId(r.u32("symbol")?),
            price: r.i64("price")?,
        },
        TAG_FUND_INSURANCE => Command::FundInsurance {
            currency: r.name("currency")?,
            amount: r.i64("amount")?,
            tx: r.i64("tx")?,
        },
        tag => return Err(r.bad(0, format!("unknown command tag {tag}"))),
    };
    if r.pos != bytes.len() {
        let extra = bytes.len() - r.pos;
        return Err(r.bad(r.pos, format!("{extra} bytes after the command")));
    }
    Ok(cmd)
}

fn decode_place(r: &mut Reader<'_>) -> Result<PlaceOrder, JournalError> {
    let user = r.i64("user")?;
    let order = r.i64("order")?;
    let symbol = SymbolId(r.u32("symbol")?);
    let side = r.code("side", Side::from_code)?;
    let order_type = r.code("type", OrderType::from_code)?;
    let tif = r.code("tif", Tif::from_code)?;
    let price = r.opt_i64("price flag", "price")?;
    let qty = r.i64("qty")?;
    let post_only = match r.u8("post_only")? {
        0 => false,
        1 => true,
        b => return Err(r.bad(r.pos - 1, format!("post_only {b} (expected 0 or 1)"))),
    };
    let stp = r.code("stp", Stp::from_code)?;
    Ok(PlaceOrder {
        user,
        order,
        symbol,
        side,
        order_type,
        tif,
        price,
        qty,
        extras: OrderExtras::NONE,
        post_only,
        stp,
    })
}

/// Writes fields one after another into a command's bytes; a command longer than
/// `MAX_COMMAND_BYTES` is a bug (the codec tests check the longest) and panics here.
struct Put<'a> {
    out: &'a mut [u8; MAX_COMMAND_BYTES],
    len: usize,
}

impl Put<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    fn i64(&mut self, v: i64) {
        self.bytes(&v.to_le_bytes());
    }

    fn name(&mut self, name: &Name) {
        let s = name.as_str().as_bytes();
        // A Name holds at most 23 bytes, so its length always fits in the byte.
        self.u8(s.len() as u8);
        self.bytes(s);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bad(&self, offset: usize, problem: String) -> JournalError {
        JournalError::BadCommand { offset, problem }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], JournalError> {
        match self.bytes.get(self.pos..self.pos + n) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.bad(
                self.pos,
                format!("truncated: {what} needs {n} bytes, {} left", self.left()),
            )),
        }
    }

    fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn u8(&mut self, what: &str) -> Result<u8, JournalError> {
        Ok(self.take(1, what)?[0])
    }

    /// A flag byte (0 or 1) and an `i64` that must be 0 under flag 0.
    fn opt_i64(&mut self, flag_what: &str, what: &str) -> Result<Option<i64>, JournalError> {
        let flag_at = self.pos;
        let flag = self.u8(flag_what)?;
        let value = self.i64(what)?;
        match (flag, value) {
            (1, v) => Ok(Some(v)),
            (0, 0) => Ok(None),
            (0, _) => Err(self.bad(flag_at, format!("{what} flag 0 with a non-zero {what}"))),
            (f, _) => Err(self.bad(flag_at, format!("{what} flag {f} (expected 0 or 1)"))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, JournalError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(b))
    }

    fn i64(&mut self, what: &str) -> Result<i64, JournalError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_le_bytes(b))
    }

    fn code<T>(
        &mut self,
        what: &str,
        from: fn(u8) -> Option<T>,
    ) -> Result<Option<T>, JournalError> {
        let at = self.pos;
        match self.u8(what)? {
            NONE_CODE => Ok(None),
            c => match from(c) {
                Some(v) => Ok(Some(v)),
                None => Err(self.bad(at, format!("{what}: unknown code {c}"))),
            },
        }
    }

    fn name(&mut self, what: &str) -> Result<Name, JournalError> {
        let at = self.pos;
        let len = self.u8(what)? as usize;
        let raw = self.take(len, what)?;
        let text = std::str::from_utf8(raw)
            .map_err(|_| self.bad(at, format!("{what}: name is not UTF-8")))?;
        Name::new(text).ok_or_else(|| {
            self.bad(
                at,
                format!(
                    "{what}: name of {len} bytes (must be 1 to {})",
                    Name::MAX_LEN
                ),
            )
        })
    }
}
