//! The support / personal-assistant session: one customer and a shop's
//! concierge assistant over many short turns: a damaged order and its
//! refund, a refund from another shop, a trip to Lisbon (flight, hotel,
//! train, dinner), a house move, and everyday questions in between. The
//! assistant has tools (`lookup_customer`, `lookup_order`, `request_refund`,
//! `book_hotel`, `book_train`, `book_table`, `get_moving_quote`,
//! `create_ticket`, `search_products`, `track_parcel`, `weather`).
//!
//! Planted facts are what people's chats carry: the customer's name and
//! number, order and booking references of several shapes, amounts with
//! their currency, dates and times with zones, addresses, phones, e-mails,
//! names of other people; 16 of them only in tool output (the refund id,
//! the hotel's confirmation and address…). Nineteen decisions and
//! constraints ("I'm vegetarian", "deliver to … only", "never share my
//! phone number with couriers"), six replaced later (the seat, the train,
//! the nights, the moving date, the e-mail, the delivery address).
//!
//! Noise: FAQ boilerplate, product searches full of prices, parcel
//! tracking of other orders, weather, "thanks!", "never mind, found it".

use serde_json::json;

use super::sessions::{Builder, Kind, Rng, Session, SessionSpec, Source};
use super::weave::{in_order, weave, Episode};

/// Seeded values of one session.
struct Values {
    first: &'static str,
    partner: &'static str,
    customer: String,
    order: String,
    tracking: String,
    eta: String,
    price: String,
    refund: String,
    mobile: String,
    office: String,
    us_order: String,
    us_refund: String,
    flight: String,
    pnr: String,
    lands: String,
    nights: u64,
    listing: String,
    hotel_conf: String,
    hotel_price: String,
    hotel_street_no: u64,
    seat_row: u64,
    ticket: String,
    table: String,
    boxes: u64,
    quote: String,
    deposit: String,
    landlord_phone: String,
    policy: String,
    case: String,
    bags_kg: u64,
    lid: String,
    birthday: u64,
    door: String,
    new_no: u64,
    sofa: String,
    shop_no: u64,
    full_name: String,
    old_email: String,
    new_email: String,
    work_email: String,
}

impl Values {
    fn new(rng: &mut Rng) -> Values {
        let (first, last) = *rng.pick(&[
            &("Dana", "Whitfield"),
            &("Ilse", "Brennan"),
            &("Noor", "Achterberg"),
        ]);
        Values {
            full_name: format!("{first} {last}"),
            old_email: format!("{}.{}@proton.me", first.to_lowercase(), last.to_lowercase()),
            new_email: format!("{}@{}.studio", first.to_lowercase(), last.to_lowercase()),
            work_email: format!(
                "{}.{}@corvid-labs.com",
                first[..1].to_lowercase(),
                last.to_lowercase()
            ),
            first,
            partner: rng.pick(&["Tomás Ferreira", "Malik Haddad", "Jonah Price"]),
            customer: format!("KD-{}-{:04}", rng.digits(4), rng.range(0, 9_999)),
            order: format!("NW-{}", rng.digits(6)),
            tracking: format!("0155{}", rng.digits(10)),
            eta: format!("2025-03-{}", rng.range(17, 28)),
            price: format!(
                "€{}.{}",
                rng.range(120, 399),
                rng.pick(&[&"99", &"49", &"00"])
            ),
            refund: format!("RF-{}", rng.digits(8)),
            mobile: format!("+44 7700 900{}", rng.digits(3)),
            office: format!("+44 131 496 {}", rng.digits(4)),
            us_order: format!("ORD/2025/{:06}", rng.range(1_000, 99_999)),
            us_refund: format!("USD {}.{:02}", rng.range(40, 190), rng.range(1, 99)),
            flight: format!("TP {}", rng.digits(4)),
            pnr: rng.code(6),
            lands: format!("{}:{:02} WET", rng.range(11, 15), rng.range(1, 11) * 5),
            nights: rng.range(2, 3),
            listing: format!("https://lisbon-stays.example/listing/{}", rng.digits(5)),
            hotel_conf: format!("HX-{}-{}", rng.digits(8), rng.digits(4)),
            hotel_price: format!("€{}.00", rng.range(520, 880)),
            hotel_street_no: rng.range(12, 240),
            seat_row: rng.range(8, 19),
            ticket: format!("TKT-{}", rng.digits(8)),
            table: format!("T-{}", rng.digits(5)),
            boxes: rng.range(24, 48),
            quote: format!("MV-{}-{}", rng.digits(4), rng.code(2)),
            deposit: format!("£1,{}0.00", rng.range(10, 49)),
            landlord_phone: format!("0131 496 0{}", rng.digits(3)),
            policy: format!("POL-{}", rng.digits(8)),
            case: format!("CS-2025-{}", rng.digits(6)),
            bags_kg: rng.range(20, 23),
            lid: format!("£{}.99", rng.range(12, 29)),
            birthday: rng.range(2, 28),
            door: rng.digits(4),
            new_no: rng.range(20, 39),
            sofa: format!("€1,{}.00", rng.range(100, 499)),
            shop_no: rng.range(110, 290),
        }
    }
}

/// A support session of `spec.messages` messages (at least what its story
/// needs).
pub fn generate(spec: SessionSpec) -> Session {
    let mut b = Builder::new(spec.seed);
    let v = Values::new(&mut b.rng);
    let story = story(&v);
    // Replacements (indices 20..=25) interleaved with the rest.
    let order = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 14, 15, 21, 16, 22, 17, 23, 18, 24, 19,
        25,
    ];
    let episodes = in_order(story, &order);
    weave(&mut b, spec.messages, &episodes, noise);
    b.finish(spec)
}

fn story(v: &Values) -> Vec<Episode<'_>> {
    let first = v.first;
    vec![
        // 0. Who the customer is.
        Box::new(move |b: &mut Builder| {
            let name = b.value(Kind::PersonName, Source::User, &v.full_name);
            let number = b.value(Kind::Reference, Source::User, &v.customer);
            b.user(format!(
                "Hi! I'm {name}, {first} is fine. My customer number is {number}."
            ));
            let office = b.value(Kind::Phone, Source::ToolOutputOnly, &v.office);
            b.tool(
                None,
                "lookup_customer",
                json!({ "customer_number": number }),
                json!({
                    "customer_number": number,
                    "name": name,
                    "tier": "gold",
                    "member_since": "2019-04-02",
                    "alt_phone": office,
                    "marketing_opt_in": false
                })
                .to_string(),
            );
            b.assistant(format!(
                "Hello {first}, found your account. How can I help today?"
            ));
        }),
        // 1. A damaged order.
        Box::new(move |b: &mut Builder| {
            let order = b.value(Kind::Reference, Source::User, &v.order);
            b.user(format!(
                "Order {order} arrived with a cracked lid on the casserole dish."
            ));
            let tracking = b.value(Kind::Reference, Source::ToolOutputOnly, &v.tracking);
            let eta = b.value(Kind::DateTime, Source::ToolOutputOnly, &v.eta);
            let url = b.value(
                Kind::Url,
                Source::ToolOutputOnly,
                format!("https://track.dpd.co.uk/parcels/{}", v.tracking),
            );
            b.tool(
                Some("Sorry to hear that! Let me pull up the order."),
                "lookup_order",
                json!({ "order": order }),
                json!({
                    "order": order,
                    "status": "delivered",
                    "items": [{"sku": "CK-2231", "name": "Cast iron casserole 28 cm", "qty": 1}],
                    "carrier": "DPD",
                    "tracking": tracking,
                    "tracking_url": url,
                    "replacement_part_eta": eta
                })
                .to_string(),
            );
            b.assistant(
                "I can see it, delivered last week. Would you like a refund or a replacement?",
            );
        }),
        // 2. The refund, and how it must be paid.
        Box::new(move |b: &mut Builder| {
            let price = b.value(Kind::Amount, Source::User, &v.price);
            let card = b.constraint(Kind::Phrase, "original card");
            b.user(format!(
                "A refund please, the full {price}. To the {card}, not store credit."
            ));
            let refund = b.value(Kind::Reference, Source::ToolOutputOnly, &v.refund);
            b.tool(
                None,
                "request_refund",
                json!({ "order": v.order, "amount": price, "method": "card" }),
                json!({ "refund_id": refund, "status": "approved", "expected_in": "3-5 business days" }).to_string(),
            );
            b.assistant(
                "Done: the refund is approved and goes back to your card within 3-5 business days.",
            );
        }),
        // 3. How to reach the customer.
        Box::new(move |b: &mut Builder| {
            let email = b.decision(Kind::Email, &v.old_email);
            let mobile = b.value(Kind::Phone, Source::User, &v.mobile);
            b.user(format!(
                "Please send confirmations to {email}. My mobile is {mobile} if you need me."
            ));
            b.assistant("Noted, confirmations go to that address.");
        }),
        // 4. Where deliveries go, and a privacy constraint.
        Box::new(move |b: &mut Builder| {
            let addr = b.constraint(Kind::Address, "14 Harbour Street");
            let phone = b.constraint(Kind::Phrase, "share my phone number");
            b.user(format!(
                "Deliveries go to {addr}, Leith, only there, not to my office. And never {phone} with couriers."
            ));
            b.assistant("Understood, I've put both on your profile.");
        }),
        // 5. Diet and the partner.
        Box::new(move |b: &mut Builder| {
            let veg = b.constraint(Kind::Phrase, "vegetarian");
            let partner = b.value(Kind::PersonName, Source::User, v.partner);
            let nuts = b.constraint(Kind::Phrase, "allergic to peanuts");
            b.user(format!(
                "For any restaurant stuff: I'm {veg}, and my partner {partner} is {nuts}."
            ));
            b.assistant("Got it, I'll filter for that whenever I suggest or book a place.");
        }),
        // 6. A refund from another shop.
        Box::new(move |b: &mut Builder| {
            let order = b.value(Kind::Reference, Source::User, &v.us_order);
            b.user(format!(
                "Different thing: the US shop order {order}, where's my refund?"
            ));
            let amount = b.value(Kind::Amount, Source::ToolOutputOnly, &v.us_refund);
            b.tool(
                None,
                "lookup_order",
                json!({ "order": order }),
                format!("order {order}: returned 2025-02-27; refund of {amount} issued to the card on file, settles in 5-7 days"),
            );
            b.assistant(
                "The refund was issued when the return arrived; it should show up within the week.",
            );
        }),
        // 7. The trip: the flight.
        Box::new(move |b: &mut Builder| {
            let flight = b.value(Kind::Identifier, Source::User, &v.flight);
            let pnr = b.value(Kind::Reference, Source::User, &v.pnr);
            let lands = b.value(Kind::DateTime, Source::User, &v.lands);
            b.user(format!(
                "Now the fun part: Lisbon in November! Flight {flight}, booking reference {pnr}, lands {lands} on the 12th."
            ));
            b.assistant("Lovely. Shall I look for a hotel close to the centre?");
        }),
        // 8. The hotel: a budget and how many nights.
        Box::new(move |b: &mut Builder| {
            let budget = b.constraint(Kind::Amount, "€900");
            let nights = b.decision(Kind::Quantity, format!("{} nights", v.nights));
            let listing = b.value(Kind::Url, Source::User, &v.listing);
            b.user(format!(
                "Yes, {nights}, and keep it under {budget} in total. Something like {listing} but a proper hotel."
            ));
            b.assistant("On it.");
        }),
        // 9. The booking: everything only in the tool's answer.
        Box::new(move |b: &mut Builder| {
            let conf = b.value(Kind::Reference, Source::ToolOutputOnly, &v.hotel_conf);
            let price = b.value(Kind::Amount, Source::ToolOutputOnly, &v.hotel_price);
            let addr = b.value(
                Kind::Address,
                Source::ToolOutputOnly,
                format!("Rua da Prata {}", v.hotel_street_no),
            );
            let checkin = b.value(Kind::DateTime, Source::ToolOutputOnly, "15:00 WET");
            b.tool(
                Some("Found a small hotel in Baixa within budget; booking it."),
                "book_hotel",
                json!({ "city": "Lisbon", "check_in": "12 Nov", "guests": 2 }),
                json!({
                    "confirmation": conf,
                    "hotel": "Casa da Prata",
                    "address": format!("{addr}, 1100-420 Lisboa"),
                    "total": price,
                    "check_in_from": checkin,
                    "cancellation": "free until 48 h before arrival"
                })
                .to_string(),
            );
            b.assistant("Booked! Free cancellation until two days before.");
        }),
        // 10. The seat.
        Box::new(move |b: &mut Builder| {
            let seat = b.decision(Kind::Identifier, format!("{}A", v.seat_row));
            b.user(format!(
                "Can you ask for a window seat on the flight? {seat} if possible."
            ));
            b.assistant("Requested with the airline.");
        }),
        // 11. The train to the airport.
        Box::new(move |b: &mut Builder| {
            let train = b.decision(Kind::DateTime, "07:40");
            b.user(format!(
                "And book the {train} train to London King's Cross on the 11th."
            ));
            let ticket = b.value(Kind::Reference, Source::ToolOutputOnly, &v.ticket);
            b.tool(
                None,
                "book_train",
                json!({ "from": "Edinburgh", "to": "London King's Cross", "day": "11 Nov", "departure": train }),
                format!("booked: 1 adult, coach C seat 42, e-ticket {ticket}, sent to the account e-mail"),
            );
            b.assistant("Booked, the e-ticket is in your inbox.");
        }),
        // 12. Dinner, and its confirmation only in the tool's answer.
        Box::new(move |b: &mut Builder| {
            let time = b.value(Kind::DateTime, Source::User, "20:30 WET");
            b.user(format!(
                "Could you book dinner for two on the 13th, {time}? Somewhere we can both eat."
            ));
            let table = b.value(Kind::Reference, Source::ToolOutputOnly, &v.table);
            b.tool(
                None,
                "book_table",
                json!({ "city": "Lisbon", "party": 2, "day": "13 Nov", "diet": ["meat-free", "no peanuts"] }),
                format!("Confirmed at Ao Lado, Rua dos Remédios 33: table {table}, 2 guests"),
            );
            b.assistant(
                "Booked at a place with a fully meat-free menu that can cook without peanuts.",
            );
        }),
        // 13. A call, and when not to call.
        Box::new(move |b: &mut Builder| {
            let call = b.value(Kind::DateTime, Source::User, "16:30 CET");
            let early = b.constraint(Kind::Phrase, "before 9am");
            b.user(format!(
                "Remind me of my call with the Frankfurt bank at {call} on Thursday. And please don't call me {early}, texts are fine."
            ));
            b.assistant("Reminder set, and noted about calls.");
        }),
        // 14. The move: a date and what to move.
        Box::new(move |b: &mut Builder| {
            let date = b.decision(Kind::DateTime, "28 June");
            let boxes = b.value(Kind::Quantity, Source::User, format!("{} boxes", v.boxes));
            b.user(format!(
                "Other big news: we're moving house on {date}. About {boxes}, a sofa and a piano. Can you get a moving quote?"
            ));
            let quote = b.value(Kind::Reference, Source::ToolOutputOnly, &v.quote);
            let email = b.value(
                Kind::Email,
                Source::ToolOutputOnly,
                "bookings@lrm-edinburgh.co.uk",
            );
            b.tool(
                None,
                "get_moving_quote",
                json!({ "from": "Leith", "to": "Edinburgh", "volume": "3-bed" }),
                json!({ "quote_id": quote, "company": "Forth & Clyde Movers", "price": "£1,450.00", "contact": email }).to_string(),
            );
            b.assistant(
                "The best quote I found includes the piano; they want a confirmation by e-mail.",
            );
        }),
        // 15. Choosing the mover; the landlord and the deposit.
        Box::new(move |b: &mut Builder| {
            let mover = b.decision(Kind::Phrase, "Lothian Removals");
            let deposit = b.value(Kind::Amount, Source::User, &v.deposit);
            let landlord = b.value(Kind::PersonName, Source::User, "Grace Okafor");
            let phone = b.value(Kind::Phone, Source::User, &v.landlord_phone);
            b.user(format!(
                "A friend swears by {mover}, let's go with them instead. The deposit of {deposit} goes to the new landlord, {landlord}, her number is {phone}."
            ));
            b.assistant("Great, I'll send the confirmation and note the deposit.");
        }),
        // 16. Insurance, and a case in the shop's system.
        Box::new(move |b: &mut Builder| {
            let policy = b.value(Kind::Reference, Source::User, &v.policy);
            b.user(format!(
                "The contents insurance is policy {policy}, they need the new address later."
            ));
            let case = b.value(Kind::Reference, Source::ToolOutputOnly, &v.case);
            b.tool(
                Some("I'll open a case so the address change reaches them."),
                "create_ticket",
                json!({ "topic": "address change", "policy": policy }),
                format!("ticket {case} created, queue: customer-care, priority normal"),
            );
        }),
        // 17. Luggage and a spare part.
        Box::new(move |b: &mut Builder| {
            let kg = b.value(Kind::Quantity, Source::User, format!("{} kg", v.bags_kg));
            let lid = b.value(Kind::Amount, Source::User, &v.lid);
            b.user(format!(
                "Is one checked bag of {kg} OK on that flight? Also order the spare lid, it's {lid} on your site."
            ));
            b.assistant("Yes, the fare includes one bag up to that weight. The lid is ordered.");
        }),
        // 18. Family, keys and a door code.
        Box::new(move |b: &mut Builder| {
            let sister = b.value(Kind::PersonName, Source::User, "Maren Holt");
            let at = b.value(Kind::DateTime, Source::User, "11:00 BST");
            let door = b.value(
                Kind::Identifier,
                Source::User,
                format!("door code {}", v.door),
            );
            let bday = b.value(
                Kind::DateTime,
                Source::User,
                format!("{} August", v.birthday),
            );
            b.user(format!(
                "My sister {sister} picks up the keys at {at}; the {door}. Oh and her birthday is {bday}, remind me a week before."
            ));
            b.assistant("Noted, and the reminder is set.");
        }),
        // 19. The new address, and a sofa with a pickup point.
        Box::new(move |b: &mut Builder| {
            let street = b.decision(Kind::Address, format!("{} Calton Road", v.new_no));
            let postcode = b.value(Kind::Address, Source::User, "EH8 8DL");
            b.supersede("14 Harbour Street", &street, None);
            b.user(format!(
                "We're in! From now on deliver everything to Flat 3, {street}, Edinburgh {postcode}."
            ));
            let sofa = b.value(Kind::Amount, Source::ToolOutputOnly, &v.sofa);
            let shop = b.value(
                Kind::Address,
                Source::ToolOutputOnly,
                format!("{} Bonnington Road", v.shop_no),
            );
            b.tool(
                Some("Updated. Your sofa order also needs a delivery slot."),
                "lookup_order",
                json!({ "order": "sofa" }),
                format!("sofa order: total {sofa}; too large for the parcel service, collect from the pickup point at Unit 4, {shop} or book a delivery slot"),
            );
            b.assistant("Shall I book a delivery slot to the new flat?");
        }),
        // 20.–25. The replacements.
        Box::new(move |b: &mut Builder| {
            let seat = b.decision(Kind::Identifier, format!("{}C", v.seat_row + 4));
            b.supersede(&format!("{}A", v.seat_row), &seat, None);
            b.user(format!("Actually make it an aisle seat, {seat}: my knee."));
            b.assistant("Changed with the airline.");
        }),
        Box::new(move |b: &mut Builder| {
            let train = b.decision(Kind::DateTime, "09:15");
            b.supersede("07:40", &train, Some("the 07:40 is too early"));
            b.user(format!(
                "No wait, book the {train} one, the 07:40 is too early."
            ));
            b.assistant("Rebooked; the new e-ticket replaces the old one.");
        }),
        Box::new(move |b: &mut Builder| {
            let nights = b.decision(Kind::Quantity, format!("{} nights", v.nights + 1));
            b.supersede(&format!("{} nights", v.nights), &nights, None);
            b.user(format!("We're staying longer: make the hotel {nights}."));
            b.assistant("Extended, still within the budget.");
        }),
        Box::new(move |b: &mut Builder| {
            let date = b.decision(Kind::DateTime, "5 July");
            b.supersede("28 June", &date, None);
            b.user(format!(
                "The move got pushed to {date}, can you tell the movers?"
            ));
            b.assistant("Done, they confirmed the new date.");
        }),
        Box::new(move |b: &mut Builder| {
            let email = b.decision(Kind::Email, &v.new_email);
            b.supersede(&v.old_email, &email, None);
            b.user(format!(
                "From now on use {email} for everything; I'm closing the old account."
            ));
            b.assistant("Updated your contact address.");
        }),
        Box::new(move |b: &mut Builder| {
            let email = b.value(Kind::Email, Source::User, &v.work_email);
            b.user(format!("And invoices for the home office go to {email}."));
            b.assistant("Noted for invoices.");
        }),
    ]
}

/// One noise episode.
fn noise(b: &mut Builder) {
    match b.rng.below(10) {
        0..=2 => filler(b),
        3 | 4 => faq(b),
        5 => products(b),
        6 => track_other(b),
        7 => weather(b),
        8 => small_talk(b),
        _ => calendar(b),
    }
}

fn filler(b: &mut Builder) {
    let (u, a) = *b.rng.pick(&[
        &("thanks!", "You're welcome!"),
        &("ok great", "Anything else?"),
        &("never mind, found it", "Glad you found it."),
        &("perfect", "Happy to help."),
        &("hmm, let me check with my partner first", "Sure, no rush."),
        &("brb", "I'll be here."),
        &("that's all for now", "Have a lovely day!"),
        &("sorry, wrong chat", "No problem."),
    ]);
    b.user(u);
    b.assistant(a);
}

fn faq(b: &mut Builder) {
    let (q, a) = *b.rng.pick(&[
        &(
            "what's your returns policy again?",
            "You can return most items within 30 days of delivery, unused and in their original packaging. Start a return from your orders page; we e-mail a prepaid label, and the refund goes back to your payment method once the parcel is scanned at our warehouse. Personalised items and opened food can't be returned.",
        ),
        &(
            "do you ship to Ireland?",
            "Yes, we ship to Ireland and most of the EU. Delivery usually takes 3 to 6 working days; duties are included at checkout, so there is nothing to pay on arrival.",
        ),
        &(
            "how do I change my password?",
            "Go to Account, then Security, and choose Change password. We'll send a confirmation link to your e-mail; the link is valid for one hour.",
        ),
        &(
            "are your pans induction safe?",
            "All our cast iron and stainless steel pans work on induction. Aluminium ones with a bonded steel base do too; the product page says so under Specifications.",
        ),
        &(
            "when are you open?",
            "Our chat is available every day. Our phone team answers Monday to Friday during office hours, and on Saturdays until early afternoon.",
        ),
        &(
            "can I pay in instalments?",
            "Yes, for orders over a certain amount you can split the payment into three interest-free instalments at checkout.",
        ),
    ]);
    b.user(q);
    b.assistant(a);
}

fn products(b: &mut Builder) {
    let what = *b.rng.pick(&[
        &"a good chef's knife",
        &"linen tea towels",
        &"a bread tin",
        &"a pasta machine",
        &"storage jars",
    ]);
    b.user(format!("can you suggest {what}?"));
    let mut items = Vec::new();
    for _ in 0..b.rng.range(3, 6) {
        let sku = format!("{}-{}", b.rng.code(2), b.rng.digits(4));
        let price = format!(
            "€{}.{}",
            b.rng.range(9, 95),
            b.rng.pick(&[&"99", &"95", &"50"])
        );
        let rating = format!("{}.{}", b.rng.range(3, 4), b.rng.range(0, 9));
        items.push(
            json!({ "sku": sku, "price": price, "rating": rating, "in_stock": b.rng.chance(80) }),
        );
    }
    b.tool(
        None,
        "search_products",
        json!({ "query": what }),
        json!({ "results": items }).to_string(),
    );
    b.assistant("Here are the best rated ones in stock; the second is the best value.");
}

fn track_other(b: &mut Builder) {
    b.user("where's my other parcel, the small one?");
    let mut out = String::new();
    for _ in 0..b.rng.range(2, 5) {
        out.push_str(&format!(
            "{}:{:02} {}\n",
            b.rng.range(10, 19),
            b.rng.range(0, 11) * 5,
            b.rng.pick(&[
                &"parcel scanned at depot",
                &"out for delivery",
                &"arrived at hub",
                &"label created"
            ])
        ));
    }
    let id = format!("JD{}", b.rng.digits(12));
    b.tool(None, "track_parcel", json!({ "parcel": id }), out);
    b.assistant("It's on its way and should arrive today.");
}

fn weather(b: &mut Builder) {
    let city = *b.rng.pick(&[&"Lisbon", &"Edinburgh", &"London"]);
    b.user(format!("what's the weather like in {city} this week?"));
    let mut out = String::new();
    for day in ["Mon", "Tue", "Wed", "Thu", "Fri"] {
        out.push_str(&format!(
            "{day}: {} C, {}\n",
            b.rng.range(8, 22),
            b.rng.pick(&[&"sunny", &"showers", &"cloudy", &"windy"])
        ));
    }
    b.tool(None, "weather", json!({ "city": city }), out);
    b.assistant("Mild, with some showers midweek; pack a light rain jacket.");
}

fn small_talk(b: &mut Builder) {
    let (q, a) = *b.rng.pick(&[
        &(
            "any idea for a quick dinner tonight?",
            "A tray bake is hard to beat: roast peppers, red onion and chickpeas with smoked paprika, then finish with lemon and parsley. Twenty minutes of work, the oven does the rest.",
        ),
        &(
            "what wine goes with mushroom risotto?",
            "Something with a bit of earthiness: a Pinot Noir, or a dry white with body like a Chardonnay that isn't too oaky.",
        ),
        &(
            "how long do I boil an egg for a runny yolk?",
            "Six minutes from boiling water, then straight into cold water.",
        ),
        &(
            "what's a good gift for a new neighbour?",
            "A plant or a small box of local biscuits works well, with a card that has your flat number on it.",
        ),
    ]);
    b.user(q);
    b.assistant(a);
}

fn calendar(b: &mut Builder) {
    b.user("what's on my calendar tomorrow?");
    let mut out = String::new();
    for _ in 0..b.rng.range(1, 4) {
        out.push_str(&format!(
            "{}:{:02}-{}:{:02} {}\n",
            b.rng.range(10, 14),
            b.rng.range(0, 11) * 5,
            b.rng.range(15, 19),
            b.rng.range(0, 11) * 5,
            b.rng.pick(&[
                &"yoga",
                &"dentist",
                &"team sync",
                &"lunch with Sam",
                &"school run"
            ])
        ));
    }
    b.tool(None, "calendar_list", json!({ "day": "tomorrow" }), out);
    b.assistant("A fairly light day.");
}
