//! What the FIX gateway does with a connection's messages once the session layer has let them
//! through: logon checks, slots, application messages into engine commands, and the reports,
//! market data and symbol lists written back.

use super::*;

impl Core {
    pub(super) fn logout(&mut self, conn: &mut Conn, text: &str) {
        let now = self.clock.now_ns;
        match conn.slot {
            Some(slot) => match self.slots[slot].session.logout(text, now, &mut conn.output) {
                Ok(Outcome::Disconnect) | Err(_) => conn.closing = true,
                Ok(_) => {}
            },
            None => conn.closing = true,
        }
    }

    /// The connection of a slot is gone.
    pub(super) fn detach(&mut self, slot: usize) {
        let now = self.clock.now_ns;
        let s = &mut self.slots[slot];
        s.conn = None;
        if let Err(e) = s.session.on_disconnect(now) {
            tracing::error!(session = %s.name, "FIX store: {e}");
        }
        self.market_data.unsubscribe(slot, None);
        if self.slots[slot].cancel_on_disconnect && !self.shutting_down {
            let cancels = self.slots[slot].desk.cancel_all();
            tracing::info!(
                session = %self.slots[slot].name,
                orders = cancels.len(),
                "cancel on disconnect"
            );
            for c in cancels {
                let request = self.request(slot, c);
                self.deferred.push_back(request);
            }
        }
    }

    pub(super) fn request(&self, slot: usize, t: ToEngine) -> Request {
        Request {
            session: FIX_SESSION_BASE + slot as SessionId,
            reply: Reply::Order {
                order: t.order,
                kind: t.kind,
            },
            op: Op::Command(t.command),
        }
    }

    pub(super) fn push(&mut self, slot: usize, t: ToEngine, sink: &mut dyn RequestSink) {
        let request = self.request(slot, t);
        self.push_request(request, sink);
    }

    /// Requests go in order: behind those already waiting for room, or into the sink.
    pub(super) fn push_request(&mut self, request: Request, sink: &mut dyn RequestSink) {
        if !self.deferred.is_empty() {
            self.deferred.push_back(request);
            return;
        }
        if let Err(request) = sink.offer(request) {
            self.deferred.push_back(request);
        }
    }

    /// Writes one report through the slot's session into `out`.
    pub(super) fn send_report(&mut self, slot: usize, report: &Report, out: &mut Vec<u8>) {
        self.write_report(slot, report, out, false);
    }

    /// [`Core::send_report`] for a report that answers the message just handled at once: it
    /// carries that message's third-party routing back ([`Session::send_reply`]). Reports
    /// that come later, from the engine, go to the session's counterparty as they are.
    fn send_reply_report(&mut self, slot: usize, report: &Report, out: &mut Vec<u8>) {
        self.write_report(slot, report, out, true);
    }

    fn write_report(&mut self, slot: usize, report: &Report, out: &mut Vec<u8>, reply: bool) {
        // Ours carry no ApplVerID: they are in the session's default application version.
        let version = self.slots[slot].session.default_appl_version();
        let now = self.clock.now_ns;
        let result = match report {
            // A version without a report for a triggered stop (FIX 4.0, 4.1) gets none: its
            // fills tell it.
            Report::Execution(exec)
                if exec.exec_type == app::exec_type::TRIGGERED
                    && app::triggered_exec_type(version).is_none() =>
            {
                return;
            }
            Report::Execution(exec) => {
                let instrument = self.instruments.by_id(exec.order.symbol).copied();
                let session = &mut self.slots[slot].session;
                let seq = session.next_sender_seq();
                let mut exec_id = [0u8; 48];
                let exec_id = if version == ApplVersion::Fix40 {
                    // FIX 4.0's ExecID is an integer: the report's MsgSeqNum, unique in the
                    // session (FIX 4.0 cannot reset sequence numbers).
                    write_number(&mut exec_id, seq)
                } else {
                    write_exec_id(&mut exec_id, exec.seq, slot, seq)
                };
                let mut order_id = [0u8; 24];
                let order_id = write_order_id(&mut order_id, exec.order.order_id);
                send(
                    session,
                    reply,
                    b"8",
                    now,
                    |w| write_execution(w, version, exec, instrument.as_ref(), exec_id, order_id),
                    out,
                )
            }
            Report::CancelReject {
                order_id,
                cl_ord_id,
                orig_cl_ord_id,
                ord_status,
                response_to,
                reason,
                text,
            } => {
                let mut id_buf = [0u8; 24];
                let order_id = write_order_id(&mut id_buf, order_id.unwrap_or(0));
                let reject = app::OrderCancelReject {
                    order_id,
                    cl_ord_id: cl_ord_id.as_bytes(),
                    orig_cl_ord_id: orig_cl_ord_id.as_bytes(),
                    ord_status: *ord_status,
                    response_to: *response_to,
                    reason: *reason,
                    text: text.as_bytes(),
                };
                let session = &mut self.slots[slot].session;
                send(session, reply, b"9", now, |w| reject.write(version, w), out)
            }
            Report::MassCancel {
                cl_ord_id,
                request_type,
                accepted,
                text,
            } => send(
                &mut self.slots[slot].session,
                reply,
                b"r",
                now,
                |w| {
                    w.str(tags::CL_ORD_ID, cl_ord_id.as_bytes());
                    w.str(tags::ORDER_ID, b"NONE");
                    w.char(tags::MASS_CANCEL_REQUEST_TYPE, *request_type);
                    w.char(
                        tags::MASS_CANCEL_RESPONSE,
                        if *accepted { *request_type } else { b'0' },
                    );
                    if !accepted {
                        w.uint(tags::MASS_CANCEL_REJECT_REASON, 99);
                    }
                    if !text.is_empty() {
                        w.str(tags::TEXT, text.as_bytes());
                    }
                },
                out,
            ),
        };
        if let Err(e) = result {
            tracing::error!(session = %self.slots[slot].name, "FIX store: {e}");
        }
    }

    /// Checks a connection's first message, a Logon, before anything of the session it names
    /// is touched: its SenderCompID must be configured, its TargetCompID ours, its Username
    /// the session's user and its Password that user's secret, and its address and user must
    /// not be over their failed-logon budget. On failure nothing of the session changes (no
    /// sequence number, no stored message, no log record, no cancel on disconnect) and the
    /// connection closes without a message (case 1S.c): a guesser learns nothing.
    pub(super) fn authenticate(
        &mut self,
        id: SessionId,
        conn: &mut Conn,
        frame: &Frame<'_>,
    ) -> Option<usize> {
        let now = self.clock.instant();
        let refused = match self.check_logon(conn.peer, frame, now) {
            Ok((sender, version, binding)) => {
                return self.attach(id, conn, sender, version, binding);
            }
            Err(refused) => refused,
        };
        if let Some(user) = refused.failed_user {
            self.throttle.failed(conn.peer, Some(user), now);
        }
        self.refusals.note(now, |suppressed| {
            tracing::warn!(
                conn = id,
                reason = refused.reason,
                suppressed,
                "FIX logon refused (suppressed: refusals since the last such line)"
            )
        });
        conn.closing = true;
        None
    }

    fn check_logon<'f>(
        &self,
        peer: PeerKey,
        frame: &Frame<'f>,
        now: Instant,
    ) -> Result<(&'f str, Version, SessionBinding), Refusal> {
        let silent = |reason| Refusal {
            reason,
            failed_user: None,
        };
        if frame.msg_type != b"A" {
            return Err(silent("the first message was not a Logon"));
        }
        let version = Version::from_begin_string(frame.begin_string)
            .ok_or(silent("unsupported BeginString"))?;
        let sender = frame
            .get(tags::SENDER_COMP_ID)
            .and_then(|s| std::str::from_utf8(s).ok())
            .ok_or(silent("no SenderCompID"))?;
        let binding = *self
            .config
            .sessions
            .get(sender)
            .ok_or(silent("SenderCompID names no configured session"))?;
        let user = binding.user;
        let refuse = |reason, failed: bool| Refusal {
            reason,
            failed_user: failed.then_some(user),
        };
        if let Err(throttled) = self.throttle.check(peer, Some(user), now) {
            return Err(refuse(
                match throttled {
                    Throttled::Address => "too many failed logons from this address",
                    Throttled::User => "too many failed logons for this user",
                },
                false,
            ));
        }
        if frame.get(tags::TARGET_COMP_ID) != Some(self.config.comp_id.as_bytes()) {
            return Err(refuse("wrong TargetCompID", true));
        }
        if frame.get(tags::USERNAME) != Some(user.to_string().as_bytes()) {
            return Err(refuse("wrong Username (553)", true));
        }
        let password = frame.get(tags::PASSWORD).unwrap_or(b"");
        if !self.credentials.check_user(user, password) {
            return Err(refuse("wrong Password (554)", true));
        }
        Ok((sender, version, binding))
    }

    /// Finds (or creates) the slot of an authenticated Logon and gives it the connection.
    fn attach(
        &mut self,
        id: SessionId,
        conn: &mut Conn,
        sender: &str,
        version: Version,
        binding: SessionBinding,
    ) -> Option<usize> {
        let key = (sender.to_string(), version);
        let slot = match self.slot_index.get(&key).copied() {
            Some(slot) => {
                // Another connection's Logon opened it while this one waited for the read.
                self.awaiting_store.remove(&id);
                slot
            }
            None if !self.store_read(id, conn, sender, version) => return None,
            None => match self.open_slot(sender, version, binding) {
                Ok(slot) => {
                    self.slot_index.insert(key, slot);
                    slot
                }
                Err(e) => {
                    tracing::error!(session = sender, "cannot open a FIX session's files: {e}");
                    conn.closing = true;
                    return None;
                }
            },
        };
        if let Some(other) = self.slots[slot].conn {
            tracing::warn!(
                session = %self.slots[slot].name,
                conn = id,
                other,
                "refused a second connection for a logged-on FIX session"
            );
            conn.closing = true;
            return None;
        }
        self.slots[slot].conn = Some(id);
        self.slots[slot].session.on_connect(self.clock.now_ns);
        conn.slot = Some(slot);
        self.pending_logons.leave(id);
        Some(slot)
    }

    /// Whether a session's store may be opened now: at once without a cluster; with one, once
    /// its read from the cluster (a task off this thread, fixstore.rs) has ended. Until then
    /// the connection waits in `awaiting_store` and its Logon is handled again when the read
    /// ends; other connections go on. A failed read refuses the Logon with a Logout.
    fn store_read(
        &mut self,
        id: SessionId,
        conn: &mut Conn,
        sender: &str,
        version: Version,
    ) -> bool {
        let Some(mirror) = &self.config.mirror else {
            return true;
        };
        let name = SessionConfig::new(version, &self.config.comp_id, sender).session_name();
        match mirror.poll_read(&name) {
            std::task::Poll::Pending => {
                self.awaiting_store.insert(id, name);
                false
            }
            std::task::Poll::Ready(Ok(())) => {
                self.awaiting_store.remove(&id);
                true
            }
            std::task::Poll::Ready(Err(e)) => {
                self.awaiting_store.remove(&id);
                tracing::error!(session = %name, "FIX logon refused: {e}");
                // The session's numbers are unknown: the Logout carries MsgSeqNum 1.
                let mut w = MessageWriter::begin(&mut conn.output, version.begin_string(), b"5");
                w.str(tags::SENDER_COMP_ID, self.config.comp_id.as_bytes());
                w.str(tags::TARGET_COMP_ID, sender.as_bytes());
                w.uint(tags::MSG_SEQ_NUM, 1);
                w.timestamp_in(version, tags::SENDING_TIME, self.clock.now_ns);
                w.str(
                    tags::TEXT,
                    b"the session's store could not be read from the cluster; log on again later",
                );
                w.finish();
                conn.closing = true;
                false
            }
        }
    }

    /// Whether connection `id` waits for a read of its session's store that has not ended.
    pub(super) fn store_read_pending(&self, id: SessionId) -> bool {
        if self.awaiting_store.is_empty() {
            return false; // the usual case, on every message: no hashing
        }
        let (Some(name), Some(mirror)) = (self.awaiting_store.get(&id), &self.config.mirror) else {
            return false;
        };
        !mirror.read_ended(name)
    }

    pub(super) fn open_slot(
        &mut self,
        sender: &str,
        version: Version,
        binding: SessionBinding,
    ) -> io::Result<usize> {
        let mut config = SessionConfig::new(version, &self.config.comp_id, sender);
        config.max_clock_skew_ns = self.config.max_clock_skew_ns;
        config.allow_user_defined_tags = self.config.allow_user_defined_tags;
        // Written once per turn of the loop, before the sockets (FixGateway::flush).
        config.defer_flush = true;
        let name = config.session_name();
        let dir = self.config.data_dir.join("fix");
        let store = SessionStore::open(&dir, &name, self.config.mirror.as_ref())?;
        let mut session = Session::new(config, store);
        if self.config.message_log {
            let log = MessageLog::open(&dir, &name)?.with_rotation(
                self.config.message_log_max_bytes,
                self.config.message_log_files,
            );
            session = session.with_log(log);
        }
        let first_id = order_id_range(binding.number, version) << ORDER_ID_SPACE_BITS;
        let mut desk = OrderDesk::new(binding.user, first_id);
        restore_desk(&mut desk, session.store_mut(), &self.instruments);
        let slot = self.slots.len();
        tracing::info!(session = %name, user = binding.user, live_orders = desk.live_orders().count(), "FIX session opened");
        self.slots.push(Slot {
            name,
            user: binding.user,
            cancel_on_disconnect: binding.cancel_on_disconnect,
            session,
            desk,
            conn: None,
            security_lists: VecDeque::new(),
        });
        Ok(slot)
    }

    /// One whole message from a connection.
    pub(super) fn on_frame(
        &mut self,
        id: SessionId,
        conn: &mut Conn,
        frame: &Frame<'_>,
        sink: &mut dyn RequestSink,
    ) {
        let slot = match conn.slot {
            Some(slot) => slot,
            None => match self.authenticate(id, conn, frame) {
                Some(slot) => slot,
                None => return,
            },
        };
        let now = self.clock.now_ns;
        let credentials = &self.credentials;
        let s = &mut self.slots[slot];
        let user = s.user;
        let mut auth = |logon: &Logon<'_>| -> Result<(), String> {
            let Some(username) = logon.username else {
                return Err("Username (553) is required: the venue user id".into());
            };
            if username != user.to_string().as_bytes() {
                return Err("this session belongs to another user".into());
            }
            let password = logon.password.unwrap_or(b"");
            if !credentials.check_user(user, password) {
                return Err("wrong Password (554)".into());
            }
            Ok(())
        };
        let outcome = s
            .session
            .on_message(frame, now, &mut auth, &mut conn.output);
        self.on_outcome(slot, id, conn, frame, sink, now, outcome);
        // Messages that arrived above a gap, in order, once it is filled (never a Logon: a
        // Logon is never queued).
        while !conn.closing {
            let bytes = match self.slots[slot].session.next_queued(now, &mut conn.output) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(session = %self.slots[slot].name, "FIX store: {e}");
                    conn.closing = true;
                    break;
                }
            };
            let Ok(Some((queued, _))) = rialto_fix::next_frame(&bytes, usize::MAX) else {
                continue; // it was whole when it arrived
            };
            let mut no_logon = |_: &Logon<'_>| Err("a queued Logon".to_string());
            let outcome = self.slots[slot].session.on_queued_message(
                &queued,
                now,
                &mut no_logon,
                &mut conn.output,
            );
            self.on_outcome(slot, id, conn, &queued, sink, now, outcome);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_outcome(
        &mut self,
        slot: usize,
        id: SessionId,
        conn: &mut Conn,
        frame: &Frame<'_>,
        sink: &mut dyn RequestSink,
        now: i64,
        outcome: Result<Outcome, rialto_fix::session::SessionError>,
    ) {
        let s = &mut self.slots[slot];
        match outcome {
            Ok(Outcome::Handled) => {}
            Ok(Outcome::LoggedOn) => {
                tracing::info!(session = %s.name, conn = id, "FIX logon");
            }
            Ok(Outcome::Deliver) => self.on_application(slot, conn, frame, sink, now),
            Ok(Outcome::Disconnect) => {
                tracing::info!(
                    session = %s.name,
                    reason = s.session.disconnect_reason().unwrap_or(""),
                    "FIX session disconnects"
                );
                conn.closing = true;
            }
            Err(e) => {
                tracing::error!(session = %s.name, "FIX store: {e}");
                conn.closing = true;
            }
        }
    }

    // Reports stay unboxed here as in the order desk (orders.rs says why).
    #[allow(clippy::result_large_err)]
    pub(super) fn on_application(
        &mut self,
        slot: usize,
        conn: &mut Conn,
        frame: &Frame<'_>,
        sink: &mut dyn RequestSink,
        now: i64,
    ) {
        let ref_seq = frame
            .get(tags::MSG_SEQ_NUM)
            .and_then(rialto_fix::parse::parse_uint)
            .unwrap_or(0);
        let reject = |s: &mut Session<SessionStore>, out: &mut Vec<u8>, invalid: app::Invalid| {
            let r = Reject {
                ref_seq_num: ref_seq,
                ref_tag: (invalid.ref_tag != 0).then_some(invalid.ref_tag),
                ref_msg_type: Some(frame.msg_type),
                reason: invalid.reason,
                text: invalid.text,
            };
            if let Err(e) = s.reject(&r, now, out) {
                tracing::error!("FIX store: {e}");
            }
        };
        // On FIXT.1.1 the message's ApplVerID, or the Logon's default, names its dictionary.
        let Some(version) = self.slots[slot].session.appl_version_of(frame) else {
            let invalid = app::Invalid {
                reason: rialto_fix::session::reject_reason::VALUE_INCORRECT,
                ref_tag: tags::APPL_VER_ID,
                text: "ApplVerID (1128) not supported: only 7, 8 or 9",
            };
            return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
        };
        let options = self.slots[slot].session.config().validation();
        // Every message is checked against the data dictionary first; a NewOrderSingle, the
        // most frequent, in the same pass that decodes it.
        if frame.msg_type != b"D"
            && let Err(v) = rialto_fix::dict::validate_with(version, frame, options)
        {
            return reject(&mut self.slots[slot].session, &mut conn.output, v.into());
        }
        // Each message either fails to decode (a session Reject), or gives a command for the
        // engine, a report to send at once, or nothing more to do here.
        let decided: Result<Result<Option<ToEngine>, Report>, app::Invalid> = match frame.msg_type {
            b"D" => match app::NewOrderSingle::decode_validated_with(version, frame, options) {
                // A limit order without Price: a conditionally required field is missing
                // (case 14m), BusinessMessageReject 5 naming it.
                Ok(m) if m.ord_type == b'2' && m.price.is_none() => {
                    let r = BusinessReject {
                        ref_seq_num: ref_seq,
                        ref_msg_type: b"D",
                        ref_id: Some(m.cl_ord_id),
                        reason: business_reject_reason::CONDITIONALLY_REQUIRED_FIELD_MISSING,
                        text: "Conditionally required field missing, field=44",
                    };
                    if let Err(e) =
                        self.slots[slot]
                            .session
                            .business_reject(&r, now, &mut conn.output)
                    {
                        tracing::error!("FIX store: {e}");
                    }
                    return;
                }
                decoded => decoded.map(|m| {
                    let desk = &mut self.slots[slot].desk;
                    desk.new_order(&m, &self.instruments, now).map(Some)
                }),
            },
            b"F" => app::OrderCancelRequest::decode(frame)
                .map(|m| self.slots[slot].desk.cancel(&m).map(Some)),
            b"G" => app::OrderCancelReplaceRequest::decode(frame).map(|m| {
                let desk = &mut self.slots[slot].desk;
                desk.replace(&m, &self.instruments).map(Some)
            }),
            b"q" => app::OrderMassCancelRequest::decode(frame).map(|m| {
                let desk = &mut self.slots[slot].desk;
                desk.mass_cancel(&m, &self.instruments).map(Some)
            }),
            b"H" => app::OrderStatusRequest::decode(frame).map(|m| {
                let desk = &self.slots[slot].desk;
                Err(desk.status(m.cl_ord_id, m.symbol, m.side, now))
            }),
            b"V" => market_data::decode_request(frame).map(|m| {
                self.market_data_request(slot, conn, &m, now);
                Ok(None)
            }),
            // Validation has rejected it in a version without it (FIX 4.2 and before).
            b"x" => app::SecurityListRequest::decode(frame).map(|m| {
                let req_id = String::from_utf8_lossy(m.security_req_id).into_owned();
                self.slots[slot].security_lists.push_back(req_id);
                let request = Request {
                    session: FIX_SESSION_BASE + slot as SessionId,
                    reply: Reply::Symbols { request: 0 },
                    op: Op::ListSymbols,
                };
                self.push_request(request, sink);
                Ok(None)
            }),
            other => {
                // RequestForPositions (AN): positions are on the binary protocol and REST, not
                // here (docs/fix.md, "Futures").
                let text = match other {
                    b"AN" => "positions are not offered over FIX",
                    _ => "unsupported message type",
                };
                let r = BusinessReject {
                    ref_seq_num: ref_seq,
                    ref_msg_type: other,
                    ref_id: None,
                    reason: business_reject_reason::UNSUPPORTED_MESSAGE_TYPE,
                    text,
                };
                if let Err(e) = self.slots[slot]
                    .session
                    .business_reject(&r, now, &mut conn.output)
                {
                    tracing::error!("FIX store: {e}");
                }
                Ok(Ok(None))
            }
        };
        let result = match decided {
            Ok(result) => result,
            Err(invalid) => {
                return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
            }
        };
        match result {
            Ok(Some(t)) => self.push(slot, t, sink),
            Ok(None) => {}
            Err(report) => self.send_reply_report(slot, &report, &mut conn.output),
        }
    }
}

impl Core {
    pub(super) fn market_data_request(
        &mut self,
        slot: usize,
        conn: &mut Conn,
        request: &market_data::Request<'_>,
        now: i64,
    ) {
        let (m, types, md_req_id) = match *request {
            market_data::Request::Valid(ref m, types) => (Some(m), types, m.md_req_id),
            market_data::Request::UnsupportedEntryType { md_req_id } => {
                (None, EntryTypes::default(), md_req_id)
            }
        };
        let md_req_id = String::from_utf8_lossy(md_req_id).into_owned();
        let refuse = |s: &mut Session<SessionStore>, out: &mut Vec<u8>, reason: u8, text: &str| {
            let sent = s.send_app(
                b"Y",
                now,
                |w| {
                    w.str(tags::MD_REQ_ID, md_req_id.as_bytes());
                    w.char(tags::MD_REQ_REJ_REASON, reason);
                    w.str(tags::TEXT, text.as_bytes());
                },
                out,
            );
            if let Err(e) = sent {
                tracing::error!("FIX store: {e}");
            }
        };
        let session = &mut self.slots[slot].session;
        let Some(m) = m else {
            return refuse(
                session,
                &mut conn.output,
                market_data::UNSUPPORTED_ENTRY_TYPE,
                "only bids (0), offers (1) and trades (2) are published",
            );
        };
        if m.subscription_request_type == b'2' {
            self.market_data.unsubscribe(slot, Some(&md_req_id));
            return;
        }
        if !matches!(m.subscription_request_type, b'0' | b'1') {
            // MDReqRejReason 4: unsupported SubscriptionRequestType.
            return refuse(
                session,
                &mut conn.output,
                b'4',
                "SubscriptionRequestType must be 0, 1 or 2",
            );
        }
        let mut symbols: Vec<SymbolId> = Vec::new();
        for name in m.symbols() {
            match self.instruments.by_name(name) {
                Some(i) => symbols.push(i.id),
                // MDReqRejReason 0: unknown symbol.
                None => return refuse(session, &mut conn.output, b'0', "unknown symbol"),
            }
        }
        let depth = usize::try_from(m.market_depth).unwrap_or(0);
        let mut publishes = std::mem::take(&mut self.publishes);
        for symbol in symbols {
            let sub = Subscription {
                slot,
                md_req_id: md_req_id.clone(),
                depth,
                types,
                rpt_seq: 0,
                stalled: false,
                once: false,
            };
            match m.subscription_request_type {
                b'1' => self.market_data.subscribe(symbol, sub, &mut publishes),
                _ => self.market_data.snapshot_once(symbol, &sub, &mut publishes),
            }
        }
        // Only this session's snapshots: straight into its connection.
        for p in publishes.drain(..) {
            debug_assert_eq!(p.slot(), slot);
            write_market_data(
                &mut self.slots[slot],
                &self.instruments,
                p,
                now,
                &mut conn.output,
            );
        }
        self.publishes = publishes;
    }
}

/// Why a first message did not log on (the connection closes without a message).
pub(super) struct Refusal {
    reason: &'static str,
    /// The user whose secret was tried, when the attempt counts as a failed logon.
    failed_user: Option<UserId>,
}

/// ExecID, unique across the venue: the engine sequence number behind the report, the
/// session's slot, and the report's own MsgSeqNum (a command's fills share its sequence number,
/// and MsgSeqNums repeat across sessions).
pub(super) fn write_exec_id(
    buf: &mut [u8; 48],
    engine_seq: u64,
    slot: usize,
    msg_seq: u64,
) -> &[u8] {
    use std::io::Write as _;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{engine_seq}-{slot}-{msg_seq}");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// A number as text (FIX 4.0's integer ExecID).
fn write_number(buf: &mut [u8; 48], n: u64) -> &[u8] {
    use std::io::Write as _;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{n}");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// OrderID as text; "NONE" for an order the venue never took.
pub(super) fn write_order_id(buf: &mut [u8; 24], order_id: u64) -> &[u8] {
    if order_id == 0 {
        return b"NONE";
    }
    use std::io::Write as _;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{order_id}");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// Sessions a configuration may list: 2^21 (millions; OrderID ranges need `number × 3 + 3`
/// below 2^23).
pub(super) const MAX_SESSIONS: u64 = 1 << 21;

/// The OrderID range of a session: `number × 3 + (0, 1, 2 for FIX 4.2, 4.4, FIXT.1.1) + 1`, as
/// before FIX 4.0, 4.1 and 4.3 were offered (so that the OrderIDs of existing sessions stay
/// where they were), and those three above all of them: `2^23 + number × 3 + (0, 1, 2) + 1`.
/// Below [`MAX_SESSIONS`] sessions the two never meet, and `range << 40` fits in 64 bits.
pub(super) fn order_id_range(number: u64, version: Version) -> u64 {
    assert!(number < MAX_SESSIONS, "{number} FIX sessions configured");
    let (base, offset) = match version {
        Version::Fix42 => (0, 0),
        Version::Fix44 => (0, 1),
        Version::Fixt11 => (0, 2),
        Version::Fix40 => (1 << 23, 0),
        Version::Fix41 => (1 << 23, 1),
        Version::Fix43 => (1 << 23, 2),
    };
    base + number * 3 + offset + 1
}

pub(super) fn write_execution(
    w: &mut MessageWriter<'_>,
    version: ApplVersion,
    exec: &Execution,
    instrument: Option<&Instrument>,
    exec_id: &[u8],
    order_id: &[u8],
) {
    let o = &exec.order;
    let zero = Decimal::new(0, 0);
    let figures = instrument.map(|i| exec.figures(i));
    let symbol: &[u8] = match (&exec.raw_symbol, instrument) {
        (Some(raw), _) => raw.as_bytes(),
        (None, Some(i)) => i.name().as_bytes(),
        (None, None) => b"?",
    };
    let report = ExecutionReport {
        order_id,
        exec_id,
        cl_ord_id: exec.cl_ord_id.as_bytes(),
        orig_cl_ord_id: exec.orig_cl_ord_id.as_ref().map(ClOrdId::as_bytes),
        exec_type: exec.exec_type,
        ord_status: o.status,
        symbol,
        side: exec.raw_side.unwrap_or(side_char(o.side)),
        ord_type: Some(o.ord_type),
        time_in_force: o.time_in_force,
        price: exec.raw_price.or(figures.as_ref().and_then(|f| f.price)),
        order_qty: exec.raw_qty.or(figures.as_ref().map(|f| f.order_qty)),
        last: figures.as_ref().and_then(|f| f.last),
        leaves_qty: figures.as_ref().map_or(zero, |f| f.leaves_qty),
        cum_qty: figures.as_ref().map_or(zero, |f| f.cum_qty),
        avg_px: figures.as_ref().map_or(zero, |f| f.avg_px),
        ord_rej_reason: exec.ord_rej_reason,
        transact_time_ns: exec.ts_ns,
        text: exec.text.map(str::as_bytes),
        stop_px: exec
            .raw_stop_px
            .or(figures.as_ref().and_then(|f| f.stop_px)),
        shown_qty: exec
            .raw_shown
            .or(figures.as_ref().and_then(|f| f.shown_qty)),
        expire_time_ns: o.expire_ts,
    };
    report.write(version, w);
    // FIX 4.0 has no SecondaryOrderID: after a restart such a session's orders are found by
    // OrderID (docs/fix.md, known gaps).
    if o.engine_id != 0 && version >= ApplVersion::Fix41 {
        w.uint(orders::SECONDARY_ORDER_ID, o.engine_id as u64);
    }
}

/// Rebuilds a desk from the ExecutionReports in a session's store (after a restart).
pub(super) fn restore_desk(
    desk: &mut OrderDesk,
    store: &mut SessionStore,
    instruments: &Instruments,
) {
    let mut buf = Vec::new();
    let mut from = 1;
    loop {
        match store.read_next(from, u64::MAX, &mut buf) {
            Ok(Some((seq, _))) => {
                from = seq + 1;
                if let Ok(Some((frame, _))) = next_frame(&buf, buf.len() + 1)
                    && frame.msg_type == b"8"
                {
                    desk.restore(&frame, instruments);
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::error!("FIX store: cannot read back the orders: {e}");
                return;
            }
        }
    }
}

/// An application message: a reply to the message just handled (with its reverse routing), or
/// not.
fn send(
    session: &mut Session<SessionStore>,
    reply: bool,
    msg_type: &[u8],
    now: i64,
    body: impl FnOnce(&mut rialto_fix::MessageWriter<'_>),
    out: &mut Vec<u8>,
) -> Result<u64, rialto_fix::session::SessionError> {
    if reply {
        session.send_reply(msg_type, now, body, out)
    } else {
        session.send_app(msg_type, now, body, out)
    }
}
