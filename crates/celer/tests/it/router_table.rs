//! Data-driven router tables: rules × paths × expected match and params.

use std::str::FromStr;

use celer::router::Router;

/// An expected match: the rule and its raw params; `None` for no match.
type Expected<'a> = Option<(&'a str, &'a [(&'a str, &'a str)])>;

/// Inserts `rules` (value = rule text) and checks each `(path, expected)`:
/// `None` for no match, or the matching rule and its raw params.
#[track_caller]
fn check(rules: &[&str], cases: &[(&str, Expected<'_>)]) {
    let mut router = Router::new();
    router.register_type::<Hex>("hex", "[0-9a-f]+").unwrap();
    for rule in rules {
        router
            .insert(rule, *rule)
            .unwrap_or_else(|err| panic!("{err}"));
    }
    for (path, expected) in cases {
        let got = router.at(path).map(|m| {
            let params: Vec<(&str, &str)> = m.params().iter().collect();
            (*m.value(), params)
        });
        let expected = expected.map(|(rule, params)| (rule, params.to_vec()));
        assert_eq!(got, expected, "path {path:?}");
    }
}

struct Hex(#[allow(dead_code)] u32);

impl FromStr for Hex {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        u32::from_str_radix(s, 16).map(Hex)
    }
}

#[test]
fn static_rules_match_exactly() {
    check(
        &["/", "/users", "/users/", "/users/new", "/a/b/c"],
        &[
            ("/", Some(("/", &[]))),
            ("/users", Some(("/users", &[]))),
            ("/users/", Some(("/users/", &[]))),
            ("/users/new", Some(("/users/new", &[]))),
            ("/a/b/c", Some(("/a/b/c", &[]))),
            ("/a/b", None),
            ("/a/b/c/d", None),
            ("/USERS", None),
            ("", None),
            ("users", None),
        ],
    );
}

#[test]
fn builtin_types_accept_only_their_values() {
    check(
        &[
            "/int/<int:n>",
            "/uint/<uint:n>",
            "/str/<string:s>",
            "/def/<s>",
            "/uuid/<uuid:u>",
            "/path/<path:p>",
            "/hex/<hex:h>",
        ],
        &[
            ("/int/42", Some(("/int/<int:n>", &[("n", "42")]))),
            ("/int/-42", Some(("/int/<int:n>", &[("n", "-42")]))),
            ("/int/+42", None),
            ("/int/4x", None),
            ("/int/", None),
            ("/int/99999999999999999999", None),
            ("/uint/7", Some(("/uint/<uint:n>", &[("n", "7")]))),
            ("/uint/-7", None),
            (
                "/uint/18446744073709551615",
                Some(("/uint/<uint:n>", &[("n", "18446744073709551615")])),
            ),
            ("/uint/18446744073709551616", None),
            ("/str/a%20b", Some(("/str/<string:s>", &[("s", "a%20b")]))),
            ("/str/", None),
            ("/str/a/b", None),
            ("/def/x", Some(("/def/<s>", &[("s", "x")]))),
            (
                "/uuid/67e55044-10b1-426f-9247-bb680e5fe0c8",
                Some((
                    "/uuid/<uuid:u>",
                    &[("u", "67e55044-10b1-426f-9247-bb680e5fe0c8")],
                )),
            ),
            ("/uuid/67e55044-10b1-426f-9247-bb680e5fe0c", None),
            ("/uuid/67e55044x10b1-426f-9247-bb680e5fe0c8", None),
            (
                "/path/a/b/c.txt",
                Some(("/path/<path:p>", &[("p", "a/b/c.txt")])),
            ),
            ("/path/", Some(("/path/<path:p>", &[("p", "")]))),
            ("/path", None),
            ("/hex/ff", Some(("/hex/<hex:h>", &[("h", "ff")]))),
            ("/hex/fg", None),
            ("/hex/fffffffff", None),
        ],
    );
}

#[test]
fn priority_is_static_then_typed_then_string_then_catch_all() {
    // Registration order is deliberately the reverse of the priority.
    check(
        &["/u/<path:rest>", "/u/<name>", "/u/<int:id>", "/u/me"],
        &[
            ("/u/me", Some(("/u/me", &[]))),
            ("/u/12", Some(("/u/<int:id>", &[("id", "12")]))),
            ("/u/bob", Some(("/u/<name>", &[("name", "bob")]))),
            ("/u/bob/x", Some(("/u/<path:rest>", &[("rest", "bob/x")]))),
        ],
    );
}

#[test]
fn failed_branches_backtrack() {
    check(
        &[
            "/a/new/show",
            "/a/<x>/edit",
            "/a/<int:n>/raw",
            "/a/<path:p>",
        ],
        &[
            ("/a/new/show", Some(("/a/new/show", &[]))),
            ("/a/new/edit", Some(("/a/<x>/edit", &[("x", "new")]))),
            ("/a/5/raw", Some(("/a/<int:n>/raw", &[("n", "5")]))),
            ("/a/5/edit", Some(("/a/<x>/edit", &[("x", "5")]))),
            ("/a/new/other", Some(("/a/<path:p>", &[("p", "new/other")]))),
        ],
    );
}

#[test]
fn mixed_segments_match_inside_a_segment() {
    check(
        &[
            "/files/<name>.<ext>",
            "/v<int:n>/items",
            "/img/<int:w>x<int:h>.png",
        ],
        &[
            (
                "/files/report.pdf",
                Some(("/files/<name>.<ext>", &[("name", "report"), ("ext", "pdf")])),
            ),
            ("/files/report", None),
            ("/v2/items", Some(("/v<int:n>/items", &[("n", "2")]))),
            ("/vx/items", None),
            (
                "/img/640x480.png",
                Some(("/img/<int:w>x<int:h>.png", &[("w", "640"), ("h", "480")])),
            ),
            ("/img/640x480.gif", None),
        ],
    );
}

#[test]
fn several_params_and_deep_rules() {
    check(
        &[
            "/users/<int:id>/posts/<slug>",
            "/users/<int:id>/posts/<slug>/comments/<uint:c>",
        ],
        &[
            (
                "/users/1/posts/hi",
                Some((
                    "/users/<int:id>/posts/<slug>",
                    &[("id", "1"), ("slug", "hi")],
                )),
            ),
            (
                "/users/1/posts/hi/comments/3",
                Some((
                    "/users/<int:id>/posts/<slug>/comments/<uint:c>",
                    &[("id", "1"), ("slug", "hi"), ("c", "3")],
                )),
            ),
            ("/users/x/posts/hi", None),
        ],
    );
}

#[test]
fn many_static_siblings_use_the_index() {
    let rules: Vec<String> = (0..100).map(|i| format!("/r{i}")).collect();
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    check(
        &rules,
        &[
            ("/r0", Some(("/r0", &[]))),
            ("/r99", Some(("/r99", &[]))),
            ("/r100", None),
        ],
    );
}

#[test]
fn regex_routes_match_the_rest_of_the_path() {
    let mut router = Router::new();
    let rule = router
        .parse_regex(r"/v(?P<major>\d+)\.(?P<minor>\d+)/.*")
        .unwrap();
    router.insert_rule(&rule, "regex");
    router.insert("/v1.0/static", "static").unwrap();
    assert_eq!(*router.at("/v1.0/static").unwrap().value(), "static");
    let m = router.at("/v3.14/anything/else").unwrap();
    assert_eq!(*m.value(), "regex");
    assert_eq!(
        m.params().iter().collect::<Vec<_>>(),
        [("major", "3"), ("minor", "14")]
    );
    assert!(router.at("/v3/x").is_none());
}

#[test]
fn invalid_rules_are_errors() {
    let router = Router::<()>::new();
    for rule in [
        "no-slash",
        "/a/<int:x",
        "/a/<nope:x>",
        "/a/<int:1x>",
        "/a/<x>/<x>",
        "/a/<path:p>/b",
        "/a/x<path:p>",
        "/a/x>",
    ] {
        assert!(router.parse(rule).is_err(), "{rule}");
    }
}

#[test]
fn lookup_of_a_static_path_reports_every_match_in_order() {
    let mut router = Router::new();
    for rule in ["/a/<path:p>", "/a/<x>", "/a/b", "/a/<int:n>"] {
        router.insert(rule, rule).unwrap();
    }
    let mut all = Vec::new();
    router.for_each_match("/a/b", |m| {
        all.push(*m.value());
        std::ops::ControlFlow::Continue(())
    });
    assert_eq!(all, ["/a/b", "/a/<x>", "/a/<path:p>"]);
}
