//! What people's chats carry: references (orders, bookings, customers),
//! amounts of money, dates and times, addresses, phone numbers, e-mail
//! addresses and people's names.
//!
//! Plain linear-time regexes, like the code-shaped extractors. Crates for
//! phone numbers (`phonenumber`) or dates parse a string already known to be
//! one; they do not find one in free text, and they would cost a minute of
//! compile time on a small machine. Finding is the hard part here, and it is
//! done the way the rest of the ledger does it: shapes plus cue words, kept
//! conservative (a name needs a cue such as "my name is" or "Mr.", a
//! six-letter code needs "booking" or "PNR" before it).
//!
//! Patterns that end in a Unicode letter class (names, street names) do not
//! end in `\b`: the word boundaries are ASCII (see `scan::compile`), and
//! "José" must not stop at "Jos".

use super::code::is_standard;
use super::scan::{pattern, Scan};
use crate::ledger::ArtifactKind;
use crate::text::is_one_of;

/// Month names and their abbreviations (English).
macro_rules! month {
    () => {
        r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
    };
}
/// Day of the month, with an optional ordinal suffix.
macro_rules! day {
    () => {
        r"(?:[12][0-9]|3[01]|0?[1-9])(?:st|nd|rd|th)?"
    };
}
/// Time zones written after a time.
macro_rules! zone {
    () => {
        r"(?:UTC|GMT|CET|CEST|EET|EEST|WET|WEST|BST|IST|EST|EDT|CST|CDT|MST|MDT|PST|PDT|AEST|AEDT|JST|KST|HKT|SGT|Z)(?:[ ]?[+-][0-9]{1,2}(?::?[0-9]{2})?)?"
    };
}
/// An amount: digits with thousands separators and cents.
macro_rules! money_number {
    () => {
        r"[0-9]{1,3}(?:[,.'][0-9]{3})+(?:[.,][0-9]{1,2})?|[0-9]+(?:[.,][0-9]{1,2})?"
    };
}
/// ISO 4217 codes people write.
macro_rules! currency_code {
    () => {
        r"(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|SEK|NOK|DKK|PLN|CZK|HUF|INR|CNY|RMB|HKD|SGD|BRL|MXN|ZAR|TRY|ILS|AED|KRW|RUB|THB)"
    };
}
/// One word of a name: capitalised, any script.
macro_rules! name_word {
    () => {
        r"\p{Lu}[\p{Ll}'’-]*\p{Ll}"
    };
}
/// A name: one to three capitalised words, with particles between.
macro_rules! name {
    () => {
        concat!(
            name_word!(),
            r"(?:[ ](?:(?:van|von|de|da|del|der|den|di|du|la|le|bin|al|ter|dos|das)[ ])*",
            name_word!(),
            r"){0,2}"
        )
    };
}

pattern!(
    GATE_MONTH,
    r"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
);
pattern!(GATE_AMPM, r"(?i-u:am|pm|a\.m|p\.m)");
pattern!(
    GATE_CURRENCY,
    r"[$€£¥₹₩₽₺₪]|USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|SEK|NOK|DKK|PLN|CZK|HUF|INR|CNY|RMB|HKD|SGD|BRL|MXN|ZAR|TRY|ILS|AED|KRW|RUB|THB|(?i-u:euro|dollar|pound|franc|yen|rupee)"
);
pattern!(
    GATE_PHONE_CUE,
    r"(?i-u:phone|tel|mobile|cell|whatsapp|fax|call me|reach me|text me|number)"
);
pattern!(
    GATE_REFERENCE_CUE,
    r"(?i-u:booking|confirmation|ref|order|ticket|case|pnr|invoice|account|customer|member|tracking|locator|reservation|voucher|policy|claim|receipt|transaction|shipment|parcel|contract|application|loyalty|number)"
);
pattern!(
    GATE_STREET,
    r"Street|St|Av|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Place|Pl|Court|Ct|Square|Sq|Terrace|Close|Crescent|Parkway|Pkwy|Highway|Hwy|Row|Mews|Gardens|Rue|Bd|Quai|Chemin|Allée|Impasse|Via|Piazza|Calle|Rua|Carrer|Plaza|Paseo|Ring|Damm|Weg|Gasse|Platz|Straße|straße|(?i-u:strasse|straat|str\.|weg|allee|gasse|platz|damm|ufer|steig|chaussee|pfad|graben|gracht|laan|plein|kade|vej|gade|gata|veien)|vägen"
);
pattern!(
    GATE_NAME,
    r"Mr|Mrs|Ms|Mx|Dr|Prof|Herr|Frau|Mme|Mlle|Sr|Sra|(?i-u:contact|ask for|speak|talk to|name|passenger|guest|recipient|attn|attention|i am|i'm|call me|landlord|landlady|partner|wife|husband|manager|colleague|friend|neighbo|boss|lawyer|solicitor|accountant|doctor|dentist|driver|agent|sister|brother|mother|father|son|daughter|teacher|tenant|owner|host|mover|contractor|plumber|electrician|on call|on-call|in charge|responsible|owns|handles|leads|manages|approves|reviews)|’m"
);
pattern!(
    EMAIL,
    r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b"
);
pattern!(
    /// An ISO date (with its time), a numeric date, or a clock time: one
    /// pass, so a log's timestamps are matched once, whole.
    NUMERIC_DATE_TIME,
    concat!(
        r"\b(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])(?:[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?\b",
        r"|[0-9]{1,2}[./][0-9]{1,2}[./][0-9]{4}\b|[0-9]{4}/[0-9]{2}/[0-9]{2}\b",
        r"|(?:[01]?[0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?(?:[ ]?(?:[aApP][mM]\b|[aApP]\.[mM]\.))?(?:[ ]?",
        zone!(),
        r"\b)?)"
    )
);
pattern!(
    TEXT_DATE,
    concat!(
        r"\b(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\.?,?[ ]+)?(?:",
        day!(),
        r"\.?[ ]+(?:of[ ]+)?",
        month!(),
        r"\.?(?:,?[ ]+[0-9]{4})?|",
        month!(),
        r"\.?[ ]+",
        day!(),
        r"(?:,?[ ]+[0-9]{4})?|",
        month!(),
        r"[ ]+[0-9]{4})\b"
    )
);
pattern!(
    AMPM_TIME,
    concat!(
        r"\b(?:1[0-2]|0?[1-9])(?:[.][0-5][0-9])?[ ]?(?:[aApP][mM]\b|[aApP]\.[mM]\.)(?:[ ]?",
        zone!(),
        r"\b)?"
    )
);
pattern!(
    AMOUNT_BEFORE,
    concat!(
        r"(?:US\$|A\$|C\$|NZ\$|HK\$|R\$|[$€£¥₹₩₽₺₪]|\b",
        currency_code!(),
        r"\b)[ ]?(?:",
        money_number!(),
        r")(?:[ ]?(?:k|K|m|M|bn|million|billion)\b)?"
    )
);
pattern!(
    AMOUNT_AFTER,
    concat!(
        r"\b(?:",
        money_number!(),
        r")[ ]?(?:[€£¥₹]|\b",
        currency_code!(),
        r"\b|(?i-u:euros?|dollars?|pounds?|francs?|yen|rupees?)\b)"
    )
);
pattern!(
    PHONE_INTL,
    r"(?:^|[ \t\r\n(:,;])(\+[0-9]{1,3}(?:[ .-]?\(?[0-9]{1,5}\)?){1,5})"
);
pattern!(
    PHONE_US,
    r"(?:^|[ \t\r\n:,;])(\([0-9]{3}\)[ ]?[0-9]{3}[ .-][0-9]{4}|[0-9]{3}[.-][0-9]{3}[.-][0-9]{4})\b"
);
pattern!(
    PHONE_CUE,
    r"\b(?i-u:phone|tel|telephone|mobile|cell|whatsapp|fax|call me (?:on|at)|reach me (?:on|at)|text me (?:on|at)|(?:her|his|their|my|our|your) (?:phone )?number)\.?(?:[ ](?i-u:number|no\.?|nr\.?))?[ ]?(?:(?i-u:is)[ ]|:[ ]?|(?i-u:at|on)[ ])?(\(?[0-9][0-9 ./()-]{5,20}[0-9])"
);
pattern!(
    REFERENCE_SEGMENTS,
    r"\b[A-Z][A-Z0-9]{0,9}(?:-[A-Z0-9]{1,12}){2,5}\b"
);
pattern!(
    REFERENCE_HASH,
    r"(?:^|[ \t\r\n(\[:])(#[A-Z0-9]{1,10}(?:-[A-Z0-9]{1,12}){1,4})\b"
);
pattern!(
    REFERENCE_CUE,
    r"\b(?i-u:booking|confirmation|reference|ref|order|ticket|case|pnr|invoice|account|customer|membership|member|tracking|locator|reservation|voucher|policy|claim|receipt|transaction|shipment|parcel|contract|application|loyalty|number)(?:[ ](?i-u:number|no\.?|nr\.?|id|code|ref|reference))?\.?[ ]?(?:(?i-u:is|was)[ ]|[:=][ ]?)?(#?[A-Z0-9][A-Z0-9-]{3,23})\b"
);
pattern!(
    /// A flight number after its cue: "flight TP 7401", "Flug LH 2417".
    FLIGHT,
    r"\b(?i-u:flight|flug|vol|vuelo|volo|vlucht)(?:[ ](?i-u:number|no\.?|nr\.?))?[ ]((?:[A-Z][A-Z0-9]|[0-9][A-Z])[ ]?[0-9]{1,4}[A-Z]?)\b"
);
pattern!(
    /// A place someone holds, after its cue: "seat 16C", "table T-94304",
    /// "gate B12", "room 412".
    PLACE,
    r"\b(?i-u:table|seat|room|gate|platform|coach|carriage|cabin|berth|locker|desk|bay|pier|terminal|track|stand)[ ](?:(?i-u:number|no\.?|nr\.?)[ ])?([A-Z]{0,2}-?[0-9]{1,6}[A-Z]?)\b"
);
pattern!(
    /// An access code with what it opens: "the door code 1242", "gate PIN:
    /// 4471", "wifi password is Hx7-22k". Kept whole: the digits alone say
    /// nothing of what they open.
    ACCESS_CODE,
    r"\b((?i-u:door|gate|front door|building|entry|entrance|access|alarm|lock|lockbox|key ?box|key ?safe|garage|safe|wifi|wi-fi|locker|padlock)[ ](?i-u:code|pin|password|passcode|combination)(?:[ ](?i-u:is)|:)?[ ][A-Za-z0-9][A-Za-z0-9#*-]{2,15})\b"
);
pattern!(
    STREET_NUMBER_FIRST,
    r"\b[0-9]{1,5}[A-Za-z]?[ ]+(?:[A-Z][a-z]+[ ]+){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Place|Pl|Court|Ct|Square|Sq|Terrace|Close|Crescent|Parkway|Pkwy|Highway|Hwy|Row|Mews|Gardens)\b"
);
pattern!(
    STREET_ROMANCE,
    concat!(
        r"\b[0-9]{1,5}(?:[ ]?(?:bis|ter))?,?[ ]+(?:Rue|Avenue|Av\.|Boulevard|Bd|Place|Quai|Chemin|Allée|Impasse|Via|Viale|Piazza|Calle|Avenida|Rua|Carrer|Plaza|Paseo)[ ]+(?:(?:de|du|des|la|le|les|del|della|dei|di|da|do|dos|das)[ ]+|d')*",
        name_word!(),
        r"(?:[ ]",
        name_word!(),
        r"){0,2}"
    )
);
pattern!(
    STREET_NAME_FIRST,
    concat!(
        r"(?:\p{Lu}\p{Ll}{2,}(?:straße|strasse|str\.|weg|allee|gasse|platz|damm|ufer|steig|chaussee|pfad|graben|gracht|straat|laan|plein|kade|vej|gade|gatan|vägen|veien|gata)|\b(?:Via|Viale|Calle|Rua|Avenida|Carrer|Piazza|Plaza|Paseo)[ ]+(?:(?:de|del|della|di|da|do|dos|das)[ ]+)*",
        name_word!(),
        r"(?:[ ]",
        name_word!(),
        r")?|",
        name_word!(),
        r"[ ](?:Straße|Strasse|Str\.|Weg|Allee|Gasse|Platz|Ring|Damm))[ ]+[0-9]{1,4}[a-z]?\b"
    )
);
pattern!(
    POSTCODE_CITY,
    concat!(
        r"\b(?:[0-9]{5}|[0-9]{4}[ ]?[A-Z]{2})[ ]+",
        name_word!(),
        r"(?:[ -]",
        name_word!(),
        r")?"
    )
);
pattern!(UK_POSTCODE, r"\b[A-Z]{1,2}[0-9][A-Z0-9]?[ ][0-9][A-Z]{2}\b");
pattern!(
    US_CITY_ZIP,
    concat!(
        name_word!(),
        r"(?:[ ]",
        name_word!(),
        r")*,[ ][A-Z]{2}[ ][0-9]{5}(?:-[0-9]{4})?\b"
    )
);
pattern!(
    /// What may follow a street line and belongs to the same address: a
    /// postcode with its city, or (after a comma) a city with a UK postcode
    /// or a US state and ZIP code.
    ADDRESS_TAIL,
    concat!(
        r"\A(?:,?[ ]+|,)(?:[0-9]{5}|[0-9]{4}[ ]?[A-Z]{2})[ ]+",
        name_word!(),
        r"(?:[ -]",
        name_word!(),
        r")?|\A,[ ]*",
        name_word!(),
        r"(?:[ ]",
        name_word!(),
        r")?(?:,?[ ](?:[A-Z]{1,2}[0-9][A-Z0-9]?[ ][0-9][A-Z]{2}|[A-Z]{2}[ ][0-9]{5}))?"
    )
);
pattern!(
    HONORIFIC,
    concat!(
        r"\b(?:Mr|Mrs|Ms|Mx|Dr|Prof|Herr|Frau|Mme|Mlle|Sr|Sra)\.?[ ]",
        name!()
    )
);
pattern!(
    NAME_CUE,
    concat!(
        r"\b(?i-u:contact(?: person)?|ask for|speak (?:to|with)|talk to|in the name of|under the name(?: of)?|(?:full|first|last|guest|passenger|customer|contact|my) name(?: is)?|passenger|guest|recipient|attn\.?|attention|(?:my|our|the|new|old|your)[ ](?:new[ ]|old[ ])?(?:landlord|landlady|partner|wife|husband|manager|colleague|friend|neighbou?r|boss|lawyer|solicitor|accountant|doctor|dentist|driver|agent|sister|brother|mother|father|son|daughter|teacher|tenant|owner|host|mover|contractor|plumber|electrician))[ ]?[:,]?[ ](",
        name!(),
        ")"
    )
);
pattern!(
    /// A full name (two words or more) as the subject of a role: "Priya
    /// Raman is on call", "Jonas Eklund owns the export", "Ana Díaz will
    /// approve it". One capitalised word is not enough here ("Billing is
    /// on call" names a team).
    NAME_ROLE,
    concat!(
        r"(",
        name_word!(),
        r"(?:[ ](?:(?:van|von|de|da|del|der|den|di|du|la|le|bin|al|ter|dos|das)[ ])*",
        name_word!(),
        r"){1,2}",
        r")[ ](?:(?:is|was|will be|'s|’s)[ ](?:(?:also|now|still)[ ])?(?:on[ -]call|in charge|responsible|the (?:owner|contact|lead|reviewer|approver)|our (?:contact|lead|owner|reviewer))|(?:will[ ])?(?:owns?|handles?|leads?|manages?|approves?|reviews?)[ ])"
    )
);
pattern!(
    SELF_INTRO,
    concat!(
        r"\b(?:(?i-u:my name is|my name's|name's|i am|i'm|call me)|[Ii]’m)[ ](",
        name!(),
        ")"
    )
);

/// Capitalised words that follow "I'm" or "ask for" but name no one.
const NOT_NAMES: &[&str] = &[
    "Not",
    "So",
    "Sure",
    "Just",
    "Also",
    "Still",
    "Really",
    "Very",
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "Here",
    "There",
    "Back",
    "Done",
    "Ok",
    "Okay",
    "Fine",
    "Good",
    "Happy",
    "Glad",
    "Sorry",
    "Afraid",
    "Going",
    "Trying",
    "Looking",
    "Using",
    "Working",
    "Interested",
    "Ready",
    "Available",
    "Unable",
    "Able",
    "Aware",
    "Confused",
    "Stuck",
    "Unsure",
    "New",
    "Calling",
    "Writing",
    "Contacting",
    "Reaching",
    "Help",
    "Sales",
    "Support",
    "Billing",
    "Customer",
    "Service",
    "Team",
    "Management",
    "Someone",
    "Anyone",
    "Everyone",
    "English",
    "French",
    "German",
    "Spanish",
    "Italian",
    "Dutch",
    "American",
    "British",
    "Canadian",
    "Australian",
    "Indian",
    "Chinese",
    "Japanese",
    "Korean",
    "Swiss",
    "Polish",
    "Russian",
    "Irish",
    "Scottish",
    "Swedish",
    "Norwegian",
    "Danish",
    "Finnish",
    "Portuguese",
    "Brazilian",
    "Mexican",
    "Jewish",
    "Muslim",
    "Catholic",
    "Vegan",
    "Vegetarian",
    "Allergic",
    "Pregnant",
    "Retired",
    "Married",
    "Single",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// First words after a postcode that are no city ("10000 The …").
const NOT_CITIES: &[&str] = &[
    "The", "And", "Or", "In", "On", "At", "To", "For", "Of", "Is", "Are", "Was", "We", "I", "It",
    "This", "That",
];

pub(super) fn emails(s: &mut Scan<'_>) {
    if !s.text.contains('@') {
        return;
    }
    for m in s.find_all(&EMAIL) {
        let tld = m.as_str().rsplit('.').next().unwrap_or("");
        let glued = matches!(s.byte_before(m.start()), Some(b'/' | b':'));
        if !glued && !is_one_of(tld.to_ascii_lowercase().as_str(), super::code::EXTENSIONS) {
            s.take(m.range(), ArtifactKind::Email, m.as_str());
        }
    }
}

pub(super) fn dates_and_times(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    let patterns = [
        Some(&NUMERIC_DATE_TIME),
        s.gated(&GATE_MONTH).then_some(&TEXT_DATE),
        s.gated(&GATE_AMPM).then_some(&AMPM_TIME),
    ];
    for re in patterns.into_iter().flatten() {
        for m in s.find_all(re) {
            let glued = matches!(s.byte_before(m.start()), Some(b'.' | b'/' | b'-' | b':'))
                || matches!(s.byte_at(m.end()), Some(b':'))
                    && s.byte_at(m.end() + 1).is_some_and(|b| b.is_ascii_digit());
            if !glued {
                s.take(m.range(), ArtifactKind::DateTime, m.as_str());
            }
        }
    }
}

pub(super) fn amounts(s: &mut Scan<'_>) {
    if !s.has_digit || !s.gated(&GATE_CURRENCY) {
        return;
    }
    for re in [&AMOUNT_BEFORE, &AMOUNT_AFTER] {
        for m in s.find_all(re) {
            let v = m.as_str().trim_end_matches(['.', ',']);
            let glued = matches!(s.byte_before(m.start()), Some(b'{' | b'\'' | b'"'))
                || s.byte_before(m.start())
                    .is_some_and(|b| b.is_ascii_alphanumeric());
            if !glued {
                s.take(m.start()..m.start() + v.len(), ArtifactKind::Amount, v);
            }
        }
    }
}

pub(super) fn phones(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    let text = s.text;
    let patterns = [
        text.contains('+').then_some(&PHONE_INTL),
        Some(&PHONE_US),
        s.gated(&GATE_PHONE_CUE).then_some(&PHONE_CUE),
    ];
    for re in patterns.into_iter().flatten() {
        for caps in s.captures_all(re) {
            let Some(m) = caps.get(1) else { continue };
            let v = m.as_str().trim_end_matches([' ', '.', '-', '(']);
            let digits = v.bytes().filter(u8::is_ascii_digit).count();
            if (7..=15).contains(&digits) {
                s.take(m.start()..m.start() + v.len(), ArtifactKind::Phone, v);
            }
        }
    }
}

pub(super) fn references(s: &mut Scan<'_>) {
    let text = s.text;
    if !s.has_digit && !text.bytes().any(|b| b.is_ascii_uppercase()) {
        return;
    }
    for m in s.find_all(&REFERENCE_SEGMENTS) {
        let v = m.as_str();
        let prefix = v.split('-').next().unwrap_or("");
        let glued = matches!(s.byte_before(m.start()), Some(b'-' | b'/' | b'.'));
        if !glued && v.bytes().any(|b| b.is_ascii_digit()) && !is_standard(prefix) {
            s.take(m.range(), ArtifactKind::Reference, v);
        }
    }
    let hashed = text.contains('#').then_some(&REFERENCE_HASH);
    for caps in hashed.map(|p| s.captures_all(p)).into_iter().flatten() {
        if let Some(m) = caps.get(1) {
            let v = m.as_str();
            if v.bytes().any(|b| b.is_ascii_digit()) && v.bytes().any(|b| b.is_ascii_uppercase()) {
                s.take(m.range(), ArtifactKind::Reference, v);
            }
        }
    }
    if s.has_digit {
        for m in s.find_all(&ACCESS_CODE) {
            if m.as_str().bytes().any(|b| b.is_ascii_digit()) {
                s.take(m.range(), ArtifactKind::Reference, m.as_str());
            }
        }
        for re in [&FLIGHT, &PLACE] {
            for caps in s.captures_all(re) {
                if let Some(m) = caps.get(1).filter(|m| m.as_str().len() >= 2) {
                    s.take(m.range(), ArtifactKind::Reference, m.as_str());
                }
            }
        }
    }
    let cued = s.gated(&GATE_REFERENCE_CUE).then_some(&REFERENCE_CUE);
    for caps in cued.map(|p| s.captures_all(p)).into_iter().flatten() {
        let (Some(all), Some(m)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        let v = m.as_str().trim_end_matches('-');
        // `ENG-1234` and `#4821` are code identifiers whatever precedes them.
        let ticket = v.split_once('-').is_some_and(|(p, n)| {
            p.len() >= 2
                && p.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                && !n.is_empty()
                && n.len() <= 7
                && n.bytes().all(|b| b.is_ascii_digit())
        });
        if ticket {
            continue;
        }
        let cue = all.as_str()[..m.start() - all.start()].to_ascii_lowercase();
        let digits = v.bytes().filter(u8::is_ascii_digit).count();
        let letters_only_code = digits == 0
            && (5..=8).contains(&v.len())
            && v.bytes().all(|b| b.is_ascii_uppercase())
            && ["pnr", "locator", "reference", "ref", "code", "number", "no"]
                .iter()
                .any(|c| {
                    cue.split(|ch: char| !ch.is_ascii_alphanumeric())
                        .any(|w| w == *c)
                });
        let year_only = digits == 4 && v.len() == 4 && (v.starts_with("19") || v.starts_with("20"));
        if (digits > 0 && !year_only) || letters_only_code {
            s.take(m.start()..m.start() + v.len(), ArtifactKind::Reference, v);
        }
    }
}

pub(super) fn addresses(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    let text = s.text;
    let streets = if s.gated(&GATE_STREET) {
        [&STREET_NUMBER_FIRST, &STREET_ROMANCE, &STREET_NAME_FIRST].to_vec()
    } else {
        Vec::new()
    };
    for re in streets {
        for m in s.find_all(re) {
            let mut end = m.end();
            // "Kastanienallee 12, 10435 Berlin" is one address.
            if let Some(tail) = ADDRESS_TAIL
                .as_ref()
                .and_then(|r| r.find(&text[end..]))
                .filter(|t| !t.is_empty())
            {
                end += tail.end();
            }
            let v = text[m.start()..end].trim_end_matches([',', ' ']);
            s.take(m.start()..m.start() + v.len(), ArtifactKind::Address, v);
        }
    }
    for m in s.find_all(&POSTCODE_CITY) {
        let city = m
            .as_str()
            .split_whitespace()
            .find(|w| w.chars().next().is_some_and(char::is_alphabetic) && w.chars().count() > 2);
        let glued = s
            .byte_before(m.start())
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'/' | b'#'));
        if !glued && city.is_some_and(|c| !is_one_of(c, NOT_CITIES)) {
            s.take(m.range(), ArtifactKind::Address, m.as_str());
        }
    }
    let zip = text.contains(", ").then_some(&US_CITY_ZIP);
    for re in zip.into_iter().chain([&UK_POSTCODE]) {
        for m in s.find_all(re) {
            s.take(m.range(), ArtifactKind::Address, m.as_str());
        }
    }
}

/// Names after a cue or an honorific; self-introductions only when
/// `self_names` (the user speaking about themselves).
pub(super) fn names(s: &mut Scan<'_>, self_names: bool) {
    if !s.gated(&GATE_NAME) {
        return;
    }
    for m in s.find_all(&HONORIFIC) {
        s.take(m.range(), ArtifactKind::Person, m.as_str());
    }
    let cued: [(&'static super::scan::Pattern, bool); 3] = [
        (&NAME_CUE, true),
        (&NAME_ROLE, true),
        (&SELF_INTRO, self_names),
    ];
    for (re, wanted) in cued {
        if !wanted {
            continue;
        }
        for caps in s.captures_all(re) {
            let Some(m) = caps.get(1) else { continue };
            let first = m.as_str().split(' ').next().unwrap_or("");
            if !is_one_of(first, NOT_NAMES) {
                s.take(m.range(), ArtifactKind::Person, m.as_str());
            }
        }
    }
}
