//! A readable one-line form of server messages (lists continue on indented lines), for tools
//! and logs: `trade seq=9 ts_ns=.. order=7 symbol=0 side=buy price=100 qty=5 fee=10 liquidity=taker`.

use std::fmt;

use rialto_core::SymbolKind;

use crate::msg::{Margin, ServerMsg};

impl fmt::Display for ServerMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerMsg::LoginAccepted { user, last_seq } => {
                write!(f, "login_accepted user={user} last_seq={last_seq}")
            }
            ServerMsg::Error { code, message } => {
                write!(f, "error code={code} message={message:?}")
            }
            ServerMsg::Heartbeat { nonce } => write!(f, "heartbeat nonce={nonce}"),
            ServerMsg::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            } => write!(
                f,
                "accepted seq={seq} ts_ns={ts_ns} order={order} kind={kind}"
            ),
            ServerMsg::Rejected {
                seq,
                ts_ns,
                order,
                kind,
                reason,
            } => write!(
                f,
                "rejected seq={seq} ts_ns={ts_ns} order={order} kind={kind} reason={reason}"
            ),
            ServerMsg::Trade {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                qty,
                fee,
                liquidity,
            } => write!(
                f,
                "trade seq={seq} ts_ns={ts_ns} order={order} symbol={} side={side} price={price} \
                 qty={qty} fee={fee} liquidity={liquidity}",
                symbol.0
            ),
            ServerMsg::Cancelled {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                qty,
                reason,
            } => write!(
                f,
                "cancelled seq={seq} ts_ns={ts_ns} order={order} symbol={} side={side} qty={qty} \
                 reason={reason}",
                symbol.0
            ),
            ServerMsg::Amended {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                stop_price,
                remaining,
                priority,
            } => write!(
                f,
                "amended seq={seq} ts_ns={ts_ns} order={order} symbol={} side={side} price={price} \
                 stop_price={stop_price} remaining={remaining} priority={priority}",
                symbol.0
            ),
            ServerMsg::Triggered {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                stop_price,
            } => write!(
                f,
                "triggered seq={seq} ts_ns={ts_ns} order={order} symbol={} side={side} \
                 stop_price={stop_price}",
                symbol.0
            ),
            ServerMsg::PhaseChanged {
                seq,
                ts_ns,
                symbol,
                phase,
            } => write!(
                f,
                "phase seq={seq} ts_ns={ts_ns} symbol={} phase={phase}",
                symbol.0
            ),
            ServerMsg::Auction {
                seq,
                ts_ns,
                symbol,
                price,
                qty,
                imbalance,
            } => write!(
                f,
                "auction seq={seq} ts_ns={ts_ns} symbol={} price={price} qty={qty} \
                 imbalance={imbalance}",
                symbol.0
            ),
            ServerMsg::Liquidated {
                seq,
                ts_ns,
                currency,
                equity,
                maintenance,
                shortfall,
            } => write!(
                f,
                "liquidated seq={seq} ts_ns={ts_ns} currency={currency} equity={equity} \
                 maintenance={maintenance} shortfall={shortfall}"
            ),
            ServerMsg::VenueSettings {
                request,
                seq,
                order_id_window_ns,
                symbols,
            } => {
                write!(
                    f,
                    "venue_settings request={request} seq={seq} \
                     order_id_window_ns={order_id_window_ns}"
                )?;
                for (id, s) in symbols {
                    write!(
                        f,
                        "\n  symbol_id={} phase={} last={} reference={} band_bps={}",
                        id.0, s.phase, s.last, s.reference, s.band_bps
                    )?;
                    if s.future {
                        write!(f, " future mark={}", s.mark)?;
                    }
                }
                Ok(())
            }
            ServerMsg::UserList { request, users } => {
                write!(f, "user_list request={request} count={}", users.len())?;
                for user in users {
                    write!(f, " {user}")?;
                }
                Ok(())
            }
            ServerMsg::SymbolList { request, symbols } => {
                write!(f, "symbol_list request={request} count={}", symbols.len())?;
                for (id, s) in symbols {
                    write!(
                        f,
                        "\n  symbol_id={} symbol={} base={} quote={} base_scale={} \
                         quote_scale={} maker_fee={} taker_fee={}",
                        id.0,
                        s.symbol,
                        s.base,
                        s.quote,
                        s.base_scale,
                        s.quote_scale,
                        s.maker_fee,
                        s.taker_fee
                    )?;
                    if s.band_bps != 0 || s.day_end != 0 {
                        write!(f, " band_bps={} day_end={}", s.band_bps, s.day_end)?;
                    }
                    match s.kind {
                        Some(SymbolKind::Spot) => {}
                        Some(SymbolKind::Future {
                            initial_margin,
                            maintenance_margin,
                            mark_price,
                        }) => write!(
                            f,
                            " type=future initial_margin={initial_margin} \
                             maintenance_margin={maintenance_margin} mark_price={mark_price}"
                        )?,
                        None => write!(f, " type=unknown")?,
                    }
                }
                Ok(())
            }
            ServerMsg::Report {
                request,
                seq,
                report,
                margins,
            } => {
                write_report_head(f, "report", *request, *seq, report)?;
                for o in &report.orders {
                    write!(
                        f,
                        "\n  order symbol={} order={} side={} price={} remaining={}",
                        o.symbol, o.order, o.side, o.price, o.remaining
                    )?;
                }
                write_futures(f, report, margins)
            }
            ServerMsg::ReportExt {
                request,
                seq,
                report,
                margins,
            } => {
                write_report_head(f, "report_ext", *request, *seq, report)?;
                for o in &report.orders {
                    write!(
                        f,
                        "\n  order symbol={} order={} side={} type={} tif={} price={} \
                         stop_price={} remaining={} shown={} filled={} expire_ts={}",
                        o.symbol,
                        o.order,
                        o.side,
                        o.order_type,
                        o.tif,
                        o.price,
                        o.stop_price,
                        o.remaining,
                        o.shown,
                        o.filled,
                        o.expire_ts
                    )?;
                }
                write_futures(f, report, margins)
            }
            ServerMsg::OrderStatus {
                request,
                seq,
                order,
                state,
                remaining,
            } => write!(
                f,
                "order_status request={request} seq={seq} order={order} state={state} \
                 remaining={remaining}"
            ),
            ServerMsg::VenueReport { request, totals } => {
                write!(
                    f,
                    "venue_report request={request} currencies={}",
                    totals.len()
                )?;
                for t in totals {
                    write!(
                        f,
                        "\n  currency={} deposits={} withdrawals={} available={} held={} fees={}",
                        t.currency, t.deposits, t.withdrawals, t.available, t.held, t.fees
                    )?;
                    if t.insurance != 0 || t.position_cost != 0 {
                        write!(
                            f,
                            " insurance={} position_cost={}",
                            t.insurance, t.position_cost
                        )?;
                    }
                }
                Ok(())
            }
            ServerMsg::Book {
                request,
                seq,
                symbol,
                bids,
                asks,
            } => {
                write!(
                    f,
                    "book request={request} seq={seq} symbol={} bids={} asks={}",
                    symbol.0,
                    bids.len(),
                    asks.len()
                )?;
                for (side, levels) in [("bid", bids), ("ask", asks)] {
                    for l in levels {
                        write!(f, "\n  {side} price={} qty={}", l.price, l.qty)?;
                    }
                }
                Ok(())
            }
            ServerMsg::AdminResult {
                request,
                seq,
                result,
            } => match result {
                Ok(()) => write!(f, "admin_result request={request} seq={seq} result=ok"),
                Err(reason) => write!(
                    f,
                    "admin_result request={request} seq={seq} result=rejected reason={reason}"
                ),
            },
            ServerMsg::UserAdded {
                request,
                seq,
                user,
                secret,
            } => write!(
                f,
                "user_added request={request} seq={seq} user={user} secret=<{} bytes>",
                secret.as_bytes().len()
            ),
            ServerMsg::SnapshotTaken {
                request,
                seq,
                state_hash,
            } => {
                write!(f, "snapshot_taken request={request} seq={seq} state_hash=")?;
                for b in state_hash {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// A report's first line and its balances, the same in both report forms.
fn write_report_head(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    request: u64,
    seq: u64,
    report: &rialto_core::UserReport,
) -> fmt::Result {
    write!(
        f,
        "{name} request={request} seq={seq} user={} balances={} orders={}",
        report.user,
        report.balances.len(),
        report.orders.len()
    )?;
    for (currency, b) in &report.balances {
        write!(
            f,
            "\n  balance currency={currency} available={} held={}",
            b.available, b.held
        )?;
    }
    Ok(())
}

/// A report's futures positions and margins, after its orders.
fn write_futures(
    f: &mut fmt::Formatter<'_>,
    report: &rialto_core::UserReport,
    margins: &[Margin],
) -> fmt::Result {
    for p in &report.positions {
        write!(
            f,
            "\n  position symbol={} lots={} cost={}",
            p.symbol, p.lots, p.cost
        )?;
    }
    for m in margins {
        write!(
            f,
            "\n  margin currency={} equity={} initial={} maintenance={}",
            m.currency, m.equity, m.initial, m.maintenance
        )?;
    }
    Ok(())
}
