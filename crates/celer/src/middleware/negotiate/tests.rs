//! Unit tests of the `Accept*` parser and the selection tables.

use proptest::prelude::*;

use super::{Accept, Field, MAX_ACCEPT_ELEMENTS, MAX_ACCEPT_PARAMS};

/// One row: the field value, an offer, and the quality it should get.
fn check(field: Field, header: &str, offer: &str, expected: u16) {
    let accept = Accept::parse(field, header);
    assert_eq!(
        accept.quality(offer),
        expected,
        "{field:?} {header:?} offer {offer:?}: {accept:?}"
    );
}

#[test]
fn media_ranges_follow_specificity() {
    // The example of RFC 9110 §12.5.1.
    let header = "text/*;q=0.3, text/plain;q=0.7, text/plain;format=flowed, \
                  text/plain;format=fixed;q=0.4, */*;q=0.5";
    let table = [
        ("text/plain;format=flowed", 1000),
        ("text/plain", 700),
        ("text/html", 300),
        ("image/jpeg", 500),
        ("text/plain;format=fixed", 400),
        ("text/html;level=3", 300),
    ];
    for (offer, expected) in table {
        check(Field::MediaType, header, offer, expected);
    }
}

#[test]
fn zero_quality_excludes_even_under_a_wildcard() {
    check(Field::MediaType, "*/*, text/html;q=0", "text/html", 0);
    check(Field::MediaType, "*/*, text/html;q=0", "text/plain", 1000);
    check(Field::Encoding, "*, gzip;q=0", "gzip", 0);
    check(Field::Encoding, "*, gzip;q=0", "br", 1000);
    check(Field::Language, "*;q=0.5, de;q=0", "de-AT", 0);
    check(Field::Charset, "*, iso-8859-1;q=0", "ISO-8859-1", 0);
}

#[test]
fn qvalues_parse_to_thousandths_and_bad_ones_drop_the_element() {
    let table = [
        ("text/html;q=0.123", 123),
        ("text/html;q=1.000", 1000),
        ("text/html;Q=0.5", 500),
        ("text/html;q=0.", 0),
        ("text/html;q=1", 1000),
        ("text/html;q=0.5;ext=1", 500),
        // Malformed weights: the element is ignored, so nothing matches.
        ("text/html;q=1.5, image/png", 0),
        ("text/html;q=0.1234, image/png", 0),
        ("text/html;q=2, image/png", 0),
        ("text/html;q=-1, image/png", 0),
        ("text/html;q=, image/png", 0),
        ("text/html;q=abc, image/png", 0),
    ];
    for (header, expected) in table {
        check(Field::MediaType, header, "text/html", expected);
    }
}

#[test]
fn malformed_elements_are_skipped_and_the_rest_is_used() {
    let header = "text, /html, */html, text/, te xt/html, ,,, \"text/html\", text/plain";
    check(Field::MediaType, header, "text/plain", 1000);
    check(Field::MediaType, header, "text/html", 0);
    // Only malformed elements: as if the field were absent.
    check(Field::MediaType, "garbage, ;;;", "text/html", 1000);
    check(Field::Language, "en_US, 123456789", "en-us", 1000);
}

#[test]
fn quoted_parameters_may_hold_commas_and_semicolons() {
    let header = "text/plain;x=\"a,b;c\";q=0.4, text/html;q=0.2";
    check(Field::MediaType, header, "text/plain;x=\"a,b;c\"", 400);
    check(Field::MediaType, header, "text/html", 200);
}

#[test]
fn languages_match_by_prefix_the_longest_range_winning() {
    let header = "en;q=0.5, en-GB;q=0.9, fr-CA, *;q=0.1";
    let table = [
        ("en-GB", 900),
        ("en-gb-oxendict", 900),
        ("en-US", 500),
        ("en", 500),
        ("fr", 100),
        ("fr-CA", 1000),
        ("enx", 100),
        ("de", 100),
    ];
    for (offer, expected) in table {
        check(Field::Language, header, offer, expected);
    }
}

#[test]
fn encodings_treat_identity_and_aliases_per_rfc() {
    // Identity is acceptable unless excluded, but the least preferred.
    check(Field::Encoding, "gzip", "identity", 1);
    check(Field::Encoding, "gzip", "br", 0);
    check(Field::Encoding, "gzip;q=0.5", "gzip", 500);
    check(Field::Encoding, "identity;q=0", "identity", 0);
    check(Field::Encoding, "*;q=0", "identity", 0);
    check(Field::Encoding, "*;q=0, identity", "identity", 1000);
    // An empty field asks for no coding at all.
    check(Field::Encoding, "", "gzip", 0);
    check(Field::Encoding, "", "identity", 1);
    check(Field::Encoding, "x-gzip", "gzip", 1000);
    check(Field::Encoding, "GZIP", "gzip", 1000);
    // Absent: everything is acceptable.
    assert_eq!(Accept::absent(Field::Encoding).quality("br"), 1000);
}

#[test]
fn best_prefers_quality_then_server_order() {
    let accept = Accept::parse(Field::Encoding, "gzip, br, zstd;q=0.9");
    assert_eq!(accept.best(&["zstd", "br", "gzip"]), Some(1));
    assert_eq!(accept.best(&["gzip", "br"]), Some(0));
    assert_eq!(accept.best(&["zstd", "deflate"]), Some(0));
    assert_eq!(accept.best(&["deflate"]), None);
    let accept = Accept::parse(Field::MediaType, "application/json;q=0");
    assert_eq!(accept.best(&["application/json"]), None);
    assert_eq!(accept.best::<&str>(&[]), None);
}

#[test]
fn elements_past_the_limit_are_not_read() {
    let mut header = vec!["x/y"; MAX_ACCEPT_ELEMENTS].join(",");
    header.push_str(",text/html");
    check(Field::MediaType, &header, "text/html", 0);
    let mut header = vec!["x/y"; MAX_ACCEPT_ELEMENTS - 1].join(",");
    header.push_str(",text/html");
    check(Field::MediaType, &header, "text/html", 1000);
}

#[test]
fn elements_with_too_many_parameters_are_ignored() {
    let params = |n: usize| (0..n).map(|i| format!(";p{i}=v")).collect::<String>();
    // The weight counts as a parameter.
    let offer = format!("text/html{}", params(MAX_ACCEPT_PARAMS));
    let at_limit = format!("text/html{};q=0.5", params(MAX_ACCEPT_PARAMS - 1));
    check(Field::MediaType, &at_limit, &offer, 500);
    let over = format!("text/html{};q=0.5, */*;q=0.1", params(MAX_ACCEPT_PARAMS));
    check(Field::MediaType, &over, &offer, 100);
}

#[test]
fn repeated_lines_are_one_list() {
    let mut headers = http::HeaderMap::new();
    headers.append("accept", "text/html;q=0.1".parse().unwrap());
    headers.append("accept", "application/json".parse().unwrap());
    let accept = Accept::from_headers(Field::MediaType, &headers);
    assert_eq!(accept.best(&["text/html", "application/json"]), Some(1));
}

proptest! {
    #[test]
    fn any_header_parses_without_panic_and_bounds_qualities(
        header in "[ -~]{0,200}",
        offer in "[a-z*/;=.0-9-]{0,20}",
    ) {
        for field in Field::ALL {
            let accept = Accept::parse(field, &header);
            prop_assert!(accept.quality(&offer) <= 1000);
        }
    }

    #[test]
    fn listing_an_offer_with_a_weight_gives_it_that_weight(
        q in 0u16..=1000,
        others in proptest::collection::vec("[a-z]{1,8}/[a-z]{1,8}", 0..5),
    ) {
        let mut header = others.iter().map(|o| format!("{o};q=0.5")).collect::<Vec<_>>();
        header.push(format!("text/html;q={}.{:03}", q / 1000, q % 1000));
        let accept = Accept::parse(Field::MediaType, &header.join(", "));
        let expected = if others.iter().any(|o| o == "text/html") { 500 } else { q };
        prop_assert_eq!(accept.quality("text/html"), expected);
    }
}
