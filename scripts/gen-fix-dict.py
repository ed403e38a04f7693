#!/usr/bin/env python3
"""Generates Rialto's FIX data dictionaries (crates/fix/src/dict/fix*.rs) from QuickFIX/J's XML.

The XML files come from QuickFIX/J 2.3.2 (org.quickfixj:quickfixj-core:2.3.2 on Maven Central),
which derived them from the FIX Protocol repository. They are not checked in. To regenerate:

    mvn -q dependency:get -Dartifact=org.quickfixj:quickfixj-core:2.3.2
    mkdir -p /tmp/fixdict && cd /tmp/fixdict && unzip -o \
        ~/.m2/repository/org/quickfixj/quickfixj-core/2.3.2/quickfixj-core-2.3.2.jar \
        FIX40.xml FIX41.xml FIX42.xml FIX43.xml FIX44.xml FIXT11.xml \
        FIX50.xml FIX50SP1.xml FIX50SP2.xml
    python3 scripts/gen-fix-dict.py /tmp/fixdict   # from the repository root

Only Rialto's scope is emitted: the header and trailer, the session (admin) messages and a
fixed list of application messages (a version that does not define one of them, e.g. FIX 4.0
and 4.1 without market data, simply has no entry for it: its MsgType is then undefined for that
version, or defined but out of scope, as the version's full list of MsgTypes says). Components are expanded in place. A field inside a
component is required only if both it and the component are (QuickFIX/J's rule). Every tag the
version defines is listed (so that "not in this message" can be told from "no such tag"), but
types and enum values are emitted only for the fields the emitted messages use.

Python 3 standard library only.
"""

import hashlib
import os
import re
import sys
import xml.etree.ElementTree as ET

ADMIN = ["0", "1", "2", "3", "4", "5", "A"]
APP = ["D", "F", "G", "H", "q", "r", "8", "9", "j", "V", "W", "X", "Y", "x", "y", "c", "d"]
JAR = "org.quickfixj:quickfixj-core:2.3.2"

KINDS = {
    "INT": "Int",
    "LENGTH": "Length",
    "NUMINGROUP": "NumInGroup",
    "SEQNUM": "SeqNum",
    "DAYOFMONTH": "DayOfMonth",
    "FLOAT": "Float",
    "PRICE": "Price",
    "QTY": "Qty",
    "AMT": "Amt",
    "PERCENTAGE": "Percentage",
    "PRICEOFFSET": "PriceOffset",
    "CHAR": "Char",
    "BOOLEAN": "Boolean",
    "STRING": "String",
    "MULTIPLEVALUESTRING": "MultipleValueString",
    "MULTIPLESTRINGVALUE": "MultipleStringValue",
    "MULTIPLECHARVALUE": "MultipleCharValue",
    "CURRENCY": "Currency",
    "EXCHANGE": "Exchange",
    "COUNTRY": "Country",
    "LANGUAGE": "Language",
    "UTCTIMESTAMP": "UtcTimestamp",
    # FIX 4.0 and 4.1 name two types differently: TIME is a UTC timestamp, DATE a YYYYMMDD date.
    "TIME": "UtcTimestamp",
    "DATE": "LocalMktDate",
    "UTCDATE": "UtcDateOnly",
    "UTCDATEONLY": "UtcDateOnly",
    "UTCTIMEONLY": "UtcTimeOnly",
    "LOCALMKTDATE": "LocalMktDate",
    "MONTHYEAR": "MonthYear",
    "MONTH-YEAR": "MonthYear",  # FIX50.xml spells it so once
    "TZTIMEONLY": "TzTimeOnly",
    "TZTIMESTAMP": "TzTimestamp",
    "DATA": "Data",
    "XMLDATA": "XmlData",
}

# The bitsets the validator keeps on the stack cover this many entries per section.
MAX_SECTION = 512

# Fibonacci hashing (2^32 / golden ratio), as `TAG_HASH` in crates/fix/src/dict/mod.rs.
TAG_HASH = 0x9E3779B9


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Dict:
    def __init__(self, path):
        self.path = path
        root = ET.parse(path).getroot()
        self.root = root
        self.fields_by_name = {}
        self.fields = {}
        for f in root.find("fields"):
            tag = int(f.get("number"))
            values = [v.get("enum") for v in f.findall("value")]
            info = (tag, f.get("name"), f.get("type"), values)
            self.fields_by_name[f.get("name")] = info
            self.fields[tag] = info
        comps = root.find("components")
        self.components = {c.get("name"): c for c in (comps if comps is not None else [])}
        self.messages = {m.get("msgtype"): m for m in root.find("messages")}
        self.groups = []  # (count_tag, delim, members)
        self.group_index = {}
        self.used = set()

    def tag(self, name):
        return self.fields_by_name[name][0]

    def expand(self, elems, ctx_required):
        """Entries (tag, required, group_index or None) for a run of XML children."""
        out = []
        for e in elems:
            req = ctx_required and e.get("required") == "Y"
            if e.tag == "field":
                out.append((self.tag(e.get("name")), req, None))
            elif e.tag == "component":
                out.extend(self.expand(self.components[e.get("name")], req))
            elif e.tag == "group":
                out.append((self.tag(e.get("name")), req, self.group(e)))
            else:
                raise SystemExit(f"{self.path}: unexpected element <{e.tag}>")
        return out

    def group(self, e):
        count_tag = self.tag(e.get("name"))
        members = dedupe(self.expand(e, True), f"group {e.get('name')}")
        if not members:
            raise SystemExit(f"{self.path}: empty group {e.get('name')}")
        key = (count_tag, tuple(members))
        if key not in self.group_index:
            self.group_index[key] = len(self.groups)
            self.groups.append((count_tag, members[0][0], members))
        return self.group_index[key]

    def section(self, elem, what):
        if elem is None:
            return []
        return dedupe(self.expand(elem, True), what)


def dedupe(entries, what):
    seen = set()
    out = []
    for entry in entries:
        if entry[0] in seen:
            print(f"note: {what}: tag {entry[0]} appears twice; the second is dropped",
                  file=sys.stderr)
            continue
        seen.add(entry[0])
        out.append(entry)
    if len(out) > MAX_SECTION:
        raise SystemExit(f"{what} has {len(out)} entries, over {MAX_SECTION}")
    return out


def rust_bytes(text):
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        else:
            raise SystemExit(f"non-ASCII enum value {text!r}")
    return 'b"' + "".join(out) + '"'


def emit_entries(entries, def_of, indent):
    """Each entry names its tag, its field's position in FIELDS, and its group if any."""
    parts = []
    for tag, req, group in entries:
        if group is None:
            parts.append(f"{'r' if req else 'o'}({tag}, {def_of[tag]})")
        else:
            parts.append(f"{'rg' if req else 'og'}({tag}, {def_of[tag]}, {group})")
    return wrap(parts, indent)


def tag_index(entries):
    """An open-addressing hash table of a section's entries by tag, as `Section::position`
    probes it: 2^k slots (at least twice the entries, so probes stay short and a miss always
    meets an empty slot), slot `(tag * TAG_HASH mod 2^32) >> (32 - k)`, then the next ones;
    each slot holds 1 + the entry's position, 0 when empty."""
    k = max(1, (2 * len(entries) - 1).bit_length())
    slots = [0] * (1 << k)
    for pos, (tag, _, _) in enumerate(entries):
        if tag >= 1 << 32:
            raise SystemExit(f"tag {tag} does not fit in 32 bits")
        at = ((tag * TAG_HASH) & 0xFFFFFFFF) >> (32 - k)
        while slots[at] != 0:
            at = (at + 1) & ((1 << k) - 1)
        slots[at] = pos + 1
    return slots


def emit_section(entries, def_of, indent):
    pad = " " * indent
    index = [str(i) for i in tag_index(entries)]
    return (f"section(\n{pad}    &[{emit_entries(entries, def_of, indent + 8)}],\n"
            f"{pad}    &[{wrap(index, indent + 8)}],\n{pad})")


def wrap(parts, indent):
    """Joins items into lines of at most ~100 columns."""
    if not parts:
        return ""
    lines, line = [], ""
    for p in parts:
        piece = p + ","
        if line and len(line) + 1 + len(piece) + indent > 100:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    pad = " " * indent
    return "\n" + "".join(f"{pad}{l}\n" for l in lines) + " " * (indent - 4)


def ranges(tags):
    """Sorted tags as inclusive (first, last) runs."""
    out = []
    for t in tags:
        if out and out[-1][1] + 1 == t:
            out[-1][1] = t
        else:
            out.append([t, t])
    return out


def used_tags(entries, groups, into):
    for tag, _, group in entries:
        into.add(tag)
        if group is not None:
            used_tags(groups[group][2], groups, into)


def generate(d, out_path, name, begin_string, msg_types, header_doc, sources):
    header = d.section(d.root.find("header"), f"{name} header")
    trailer = d.section(d.root.find("trailer"), f"{name} trailer")
    messages = []
    for mt in msg_types:
        m = d.messages.get(mt)
        if m is None:
            print(f"note: {name} does not define MsgType {mt}", file=sys.stderr)
            continue
        body = d.section(m, f"{name} {m.get('name')}")
        messages.append((mt, m.get("name"), m.get("msgcat") == "admin", body))
    messages.sort(key=lambda m: m[0].encode())

    used = set()
    used_tags(header, d.groups, used)
    used_tags(trailer, d.groups, used)
    for m in messages:
        used_tags(m[3], d.groups, used)

    def pair_of(tag):
        """For a data field, its length field; for a length field, its data field."""
        _, fname, ftype, _ = d.fields[tag]
        if ftype in ("DATA", "XMLDATA"):
            length = 93 if tag == 89 else tag - 1
            lf = d.fields.get(length)
            if lf and lf[2] in ("LENGTH", "INT") and "Len" in lf[1]:
                return length
            raise SystemExit(f"{name}: no length field for data field {fname}")
        for other in d.fields.values():
            if other[2] in ("DATA", "XMLDATA") and pair_of(other[0]) == tag:
                return other[0]
        return 0

    out = []
    w = out.append
    w("// @generated by scripts/gen-fix-dict.py: do not edit by hand.\n")
    w(f"//! {header_doc}\n//!\n")
    w(f"//! Generated from QuickFIX/J 2.3.2's data dictionaries (Maven Central, `{JAR}`,\n")
    w("//! derived by QuickFIX from the FIX Protocol repository). Inputs (sha256):\n")
    for path, digest in sources:
        w(f"//! - `{os.path.basename(path)}` {digest}\n")
    w("//!\n//! Regenerate with `python3 scripts/gen-fix-dict.py DIR` (see the script's header).\n\n")
    # FIX 4.1's messages in scope have no repeating group.
    group_type = "Group, " if d.groups else ""
    w(f"use super::{{Dictionary, FieldDef, {group_type}Kind as K, Message}};\n")
    w("@CONSTRUCTORS@\n\n")
    max_tag = max(used, default=0)
    # An entry carries its field's position in FIELDS (emitted sorted by tag), so that the
    # validator finds the definition without a second lookup by tag.
    def_of = {tag: i for i, tag in enumerate(sorted(used))}
    w("const MESSAGES: &[Message] = &[\n")
    for mt, mname, admin, body in messages:
        w(f"    Message {{\n        msg_type: {rust_bytes(mt)},\n")
        w(f"        name: \"{mname}\",\n        admin: {str(admin).lower()},\n")
        w(f"        body: {emit_section(body, def_of, 8)},\n    }},\n")
    w("];\n\n")
    w("const FIELDS: &[FieldDef] = &[\n")
    for tag in sorted(used):
        _, fname, ftype, values = d.fields[tag]
        kind = KINDS.get(ftype)
        if kind is None:
            raise SystemExit(f"{name}: unknown type {ftype} of {fname}")
        vals = sorted(set(values), key=lambda v: v.encode())
        vtext = wrap([rust_bytes(v) for v in vals], 8) if vals else ""
        w(f"    fd({tag}, \"{fname}\", K::{kind}, {pair_of(tag)}, &[{vtext}]),\n")
    w("];\n\n")
    w(f"pub static DICT: Dictionary = Dictionary {{\n")
    w(f"    name: \"{name}\",\n")
    w(f"    begin_string: {rust_bytes(begin_string)},\n")
    w(f"    header: {emit_section(header, def_of, 4)},\n")
    w(f"    trailer: {emit_section(trailer, def_of, 4)},\n")
    w("    messages: MESSAGES,\n")
    w("    message_index: &message_index(MESSAGES),\n")
    w("    groups: &[\n")
    for i, (count_tag, delim, members) in enumerate(d.groups):
        gname = d.fields[count_tag][1]
        w(f"        // {i}: {gname}\n")
        w(f"        Group {{\n            count_tag: {count_tag},\n            delimiter: {delim},\n")
        w(f"            members: {emit_section(members, def_of, 12)},\n        }},\n")
    w("    ],\n    fields: FIELDS,\n")
    w(f"    field_index: &field_index::<{max_tag + 1}>(FIELDS),\n")
    w(f"    all_tags: &[{wrap([f'({a}, {b})' for a, b in ranges(sorted(d.fields))], 8)}],\n")
    all_types = sorted(d.messages, key=lambda t: t.encode())
    w(f"    msg_types: &[{wrap([rust_bytes(t) for t in all_types], 8)}],\n")
    w("};\n")
    text = "".join(out)
    used_fns = [c for c in ["fd", "field_index", "message_index", "o", "og", "r", "rg", "section"]
                if re.search(rf"[ \[&]{c}[(:]", text)]
    text = text.replace("@CONSTRUCTORS@", f"use super::{{{', '.join(used_fns)}}};")
    with open(out_path, "w") as f:
        f.write(text)
    print(f"{out_path}: {len(messages)} messages, {len(d.groups)} groups, {len(used)} fields, "
          f"{len(d.fields)} tags", file=sys.stderr)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    src = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.join(root, "crates", "fix", "src", "dict")
    session_doc = "FIX {}: header, trailer, session and application messages."
    app_doc = "FIX {}: application messages (over FIXT 1.1; no header or trailer of its own)."
    jobs = [
        ("FIX40.xml", "fix40.rs", "FIX.4.0", ADMIN + APP, session_doc.format("4.0")),
        ("FIX41.xml", "fix41.rs", "FIX.4.1", ADMIN + APP, session_doc.format("4.1")),
        ("FIX42.xml", "fix42.rs", "FIX.4.2", ADMIN + APP, session_doc.format("4.2")),
        ("FIX43.xml", "fix43.rs", "FIX.4.3", ADMIN + APP, session_doc.format("4.3")),
        ("FIX44.xml", "fix44.rs", "FIX.4.4", ADMIN + APP, session_doc.format("4.4")),
        ("FIXT11.xml", "fixt11.rs", "FIXT.1.1", ADMIN, "FIXT 1.1: the session layer under FIX 5.0, 5.0SP1 and 5.0SP2 (header, trailer, session messages)."),
        ("FIX50.xml", "fix50.rs", "FIX.5.0", APP, app_doc.format("5.0")),
        ("FIX50SP1.xml", "fix50sp1.rs", "FIX.5.0SP1", APP, app_doc.format("5.0SP1")),
        ("FIX50SP2.xml", "fix50sp2.rs", "FIX.5.0SP2", APP, app_doc.format("5.0SP2")),
    ]
    for xml, rs, name, types, doc in jobs:
        path = os.path.join(src, xml)
        d = Dict(path)
        begin = "FIXT.1.1" if name.startswith("FIX.5.0") else name
        generate(d, os.path.join(out_dir, rs), name, begin, types, doc, [(path, sha256(path))])


if __name__ == "__main__":
    main()
