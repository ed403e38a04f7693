package rialto.interop;

import java.math.BigDecimal;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import quickfix.FieldMap;
import quickfix.FieldNotFound;
import quickfix.Log;
import quickfix.Message;

/** Rialto's FIX conventions and small helpers shared by the programs. */
final class Fix {
    static final String ACCEPTOR_COMP_ID = "RIALTO";
    static final String SYMBOL = "BTC-USD";
    /** Demo users 1..8 log on as TRADER1..TRADER8. */
    static final int MAX_USER = 8;
    static final String FIX44 = "FIX.4.4";
    static final String FIXT11 = "FIXT.1.1";
    /** Prices have tick 0.01 and quantities lot 0.001 (shared/spec/exchange-rules.md). */
    static final int PRICE_SCALE = 2;
    static final int QTY_SCALE = 3;
    static final char SOH = '\u0001';

    private Fix() {}

    static String clientCompId(int user) {
        return "TRADER" + user;
    }

    /** The value of a tag, or null when absent (FieldNotFound is not an error for a check). */
    static String get(FieldMap map, int tag) {
        if (!map.isSetField(tag)) {
            return null;
        }
        try {
            return map.getString(tag);
        } catch (FieldNotFound e) {
            return null;
        }
    }

    static String msgType(Message m) {
        String type = get(m.getHeader(), 35);
        return type == null ? "?" : type;
    }

    /** A FIX message as text, SOH shown as '|'. */
    static String readable(String raw) {
        return raw.replace(SOH, '|');
    }

    static String readable(Message m) {
        return readable(m.toString());
    }

    /**
     * A decimal as a whole number of units of 10^-scale (ticks, lots), or null when it is off that
     * grid, not positive, or does not fit: exactly, never through a double.
     */
    static Long toUnits(String decimal, int scale) {
        try {
            BigDecimal value = new BigDecimal(decimal);
            if (value.signum() <= 0) {
                return null;
            }
            return value.movePointRight(scale).longValueExact();
        } catch (NumberFormatException | ArithmeticException e) {
            return null;
        }
    }

    static String fromUnits(long units, int scale) {
        return BigDecimal.valueOf(units, scale).toPlainString();
    }

    private static final Map<Integer, String> NAMES = Map.ofEntries(
            Map.entry(6, "AvgPx"), Map.entry(11, "ClOrdID"), Map.entry(14, "CumQty"),
            Map.entry(17, "ExecID"), Map.entry(31, "LastPx"), Map.entry(32, "LastQty"),
            Map.entry(35, "MsgType"), Map.entry(37, "OrderID"), Map.entry(38, "OrderQty"),
            Map.entry(39, "OrdStatus"), Map.entry(40, "OrdType"), Map.entry(41, "OrigClOrdID"),
            Map.entry(43, "PossDupFlag"), Map.entry(44, "Price"), Map.entry(54, "Side"),
            Map.entry(55, "Symbol"), Map.entry(58, "Text"), Map.entry(59, "TimeInForce"),
            Map.entry(102, "CxlRejReason"), Map.entry(103, "OrdRejReason"),
            Map.entry(122, "OrigSendingTime"), Map.entry(150, "ExecType"),
            Map.entry(151, "LeavesQty"), Map.entry(371, "RefTagID"), Map.entry(372, "RefMsgType"),
            Map.entry(373, "SessionRejectReason"), Map.entry(434, "CxlRejResponseTo"),
            Map.entry(45, "RefSeqNum"), Map.entry(7, "BeginSeqNo"), Map.entry(16, "EndSeqNo"),
            Map.entry(36, "NewSeqNo"), Map.entry(123, "GapFillFlag"), Map.entry(99, "StopPx"),
            Map.entry(111, "MaxFloor"), Map.entry(126, "ExpireTime"),
            Map.entry(378, "ExecRestatementReason"), Map.entry(1138, "DisplayQty"));

    static String tagName(int tag) {
        String name = NAMES.get(tag);
        return name == null ? Integer.toString(tag) : name + "(" + tag + ")";
    }

    /**
     * A QuickFIX/J session log that keeps the last raw messages and events of one session in
     * memory, so that a failure can show what was on the wire.
     */
    static final class RecentLog implements Log {
        private static final int KEEP = 60;
        private final ArrayDeque<String> lines = new ArrayDeque<>();

        private synchronized void add(String line) {
            if (lines.size() == KEEP) {
                lines.removeFirst();
            }
            lines.addLast(line);
        }

        @Override
        public void clear() {}

        @Override
        public void onIncoming(String message) {
            add("<- " + readable(message));
        }

        @Override
        public void onOutgoing(String message) {
            add("-> " + readable(message));
        }

        @Override
        public void onEvent(String text) {
            add("   " + text);
        }

        @Override
        public void onErrorEvent(String text) {
            add("!! " + text);
        }

        synchronized List<String> lines() {
            return new ArrayList<>(lines);
        }

        /** The last incoming raw message with this MsgSeqNum, if still kept. */
        synchronized String incomingWithSeq(String seq) {
            String needle = "|34=" + seq + "|";
            String found = null;
            for (String line : lines) {
                if (line.startsWith("<- ") && line.contains(needle)) {
                    found = line.substring(3);
                }
            }
            return found;
        }
    }
}
