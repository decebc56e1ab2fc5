//! Cookies over real sockets: a session of curl requests keeping a cookie
//! file, signed and encrypted values tampered with on the wire, and the
//! header limits.

use celer::cookie::{
    Algorithm, Cookie, CookieJar, EncryptionKeys, MAX_COOKIE_HEADER_BYTES, MAX_COOKIES, SameSite,
    SigningKeys,
};
use celer::{App, Error, Request};

use crate::wire::{Served, curl};

fn app() -> App {
    async fn visit(mut req: Request) -> Result<(CookieJar, String), Error> {
        let keys = req.state::<SigningKeys>()?.clone();
        let mut jar = req.extract::<CookieJar>().await?;
        let n: u32 = jar
            .get_signed(&keys, "visits")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        jar.set_signed(
            &keys,
            Cookie::new("visits", (n + 1).to_string())
                .path("/")
                .http_only(true)
                .same_site(SameSite::Strict),
        )?;
        Ok((jar, format!("visit {}", n + 1)))
    }

    async fn cart(mut req: Request) -> Result<(CookieJar, String), Error> {
        let keys = req.state::<EncryptionKeys>()?.clone();
        let mut jar = req.extract::<CookieJar>().await?;
        let old = jar.get_private(&keys, "cart").unwrap_or_default();
        let item = req.query_param("add").unwrap_or_default().into_owned();
        let cart = format!("{old}{item};");
        jar.set_private(&keys, Cookie::new("cart", cart.clone()).path("/"))?;
        Ok((jar, cart))
    }

    async fn count(mut req: Request) -> Result<String, Error> {
        let jar = req.extract::<CookieJar>().await?;
        Ok(format!("{} cookies, a={:?}", jar.len(), jar.get("a")))
    }

    async fn logout(mut req: Request) -> Result<(CookieJar, &'static str), Error> {
        let mut jar = req.extract::<CookieJar>().await?;
        jar.remove("visits", "/")?;
        Ok((jar, "bye"))
    }

    let mut app = App::new();
    app.problem_details(true);
    app.state(SigningKeys::new(Algorithm::Sha512, [[5u8; 32]]).unwrap());
    app.state(EncryptionKeys::new([[6u8; 32]]).unwrap());
    app.get("/visit", visit);
    app.get("/cart", cart);
    app.get("/count", count);
    app.get("/logout", logout);
    app
}

#[tokio::test]
async fn curl_keeps_a_signed_counter_in_its_cookie_file() {
    let served = Served::start(app()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cookies.txt");
    let file = file.to_str().unwrap();
    for n in 1..=3 {
        let out = curl(&["-b", file, "-c", file, &served.url("/visit")]).await;
        assert_eq!(out, format!("visit {n}"));
    }
    let saved = std::fs::read_to_string(file).unwrap();
    // curl marks HttpOnly cookies with this prefix in its file.
    assert!(saved.contains("#HttpOnly_127.0.0.1"), "{saved}");
    let out = curl(&["-b", file, "-c", file, &served.url("/logout")]).await;
    assert_eq!(out, "bye");
    let out = curl(&["-b", file, "-c", file, &served.url("/visit")]).await;
    assert_eq!(out, "visit 1", "the removal cookie cleared the counter");
    served.stop().await;
}

#[tokio::test]
async fn signed_cookie_tampered_truncated_or_renamed_reads_as_absent() {
    let served = Served::start(app()).await;
    let res = served
        .one("GET /visit HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
        .await;
    let set = res.header("set-cookie").unwrap().to_owned();
    assert!(
        set.ends_with("; Path=/; HttpOnly; SameSite=Strict"),
        "{set}"
    );
    let pair = set.split(';').next().unwrap();
    let value = pair.strip_prefix("visits=").unwrap();
    assert!(value.ends_with('1') && value.len() == 86 + 1, "{value}");

    let ask = |cookie: String| {
        let served = &served;
        async move {
            let head =
                format!("GET /visit HTTP/1.1\nHost: x\nCookie: {cookie}\nConnection: close\n\n");
            served.one(&head, b"").await.text()
        }
    };
    assert_eq!(ask(pair.to_owned()).await, "visit 2");
    // Tampered: the count changed after the tag.
    assert_eq!(ask(format!("visits={}9", &value[..86])).await, "visit 1");
    // Truncated.
    assert_eq!(ask(format!("visits={}", &value[..40])).await, "visit 1");
    // Renamed: the tag was made for `visits`.
    assert_eq!(ask(format!("visitz={value}; visits=x")).await, "visit 1");
    served.stop().await;
}

#[tokio::test]
async fn encrypted_cookie_hides_and_binds_its_value() {
    let served = Served::start(app()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cookies.txt");
    let file = file.to_str().unwrap();
    let out = curl(&["-b", file, "-c", file, &served.url("/cart?add=pear")]).await;
    assert_eq!(out, "pear;");
    let out = curl(&["-b", file, "-c", file, &served.url("/cart?add=fig")]).await;
    assert_eq!(out, "pear;fig;");
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(
        !saved.contains("pear") && saved.contains("\tcart\t"),
        "{saved}"
    );
    // A flipped character of the sealed value: the cart reads as empty.
    let sealed = saved
        .lines()
        .find_map(|line| line.split("\tcart\t").nth(1))
        .unwrap();
    let mut bytes = sealed.as_bytes().to_vec();
    bytes[20] = if bytes[20] == b'A' { b'B' } else { b'A' };
    let forged = format!("cart={}", String::from_utf8(bytes).unwrap());
    let out = curl(&["-b", &forged, &served.url("/cart?add=kiwi")]).await;
    assert_eq!(out, "kiwi;");
    served.stop().await;
}

#[tokio::test]
async fn cookie_header_limits_answer_431_with_the_reason() {
    let served = Served::start(app()).await;
    // Just at the byte limit: read.
    let filler = "x".repeat(MAX_COOKIE_HEADER_BYTES - "a=1; b=".len());
    let head =
        format!("GET /count HTTP/1.1\nHost: x\nCookie: a=1; b={filler}\nConnection: close\n\n");
    let res = served.one(&head, b"").await;
    assert_eq!(
        (res.status, res.text()),
        (200, "2 cookies, a=Some(\"1\")".to_owned())
    );
    // Over, split across two fields (7 + 8187 bytes): refused.
    let head = format!(
        "GET /count HTTP/1.1\nHost: x\nCookie: a=12345\nCookie: b={filler}\nConnection: close\n\n"
    );
    let res = served.one(&head, b"").await;
    assert_eq!(res.status, 431);
    assert_eq!(res.header("content-type"), Some("application/problem+json"));
    assert!(
        res.text().contains("the Cookie header is over 8192 bytes"),
        "{}",
        res.text()
    );

    // At the count limit: read; one more: refused.
    let pairs = |n: usize| {
        (0..n)
            .map(|i| format!("c{i}=v"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let head = format!(
        "GET /count HTTP/1.1\nHost: x\nCookie: {}\nConnection: close\n\n",
        pairs(MAX_COOKIES)
    );
    let res = served.one(&head, b"").await;
    assert_eq!(res.text(), format!("{MAX_COOKIES} cookies, a=None"));
    let head = format!(
        "GET /count HTTP/1.1\nHost: x\nCookie: {}\nConnection: close\n\n",
        pairs(MAX_COOKIES + 1)
    );
    let res = served.one(&head, b"").await;
    assert_eq!(res.status, 431);
    assert!(res.text().contains("over 64 cookies"), "{}", res.text());

    // Bytes that are not UTF-8 do not name a cookie; the rest is read.
    let req = b"GET /count HTTP/1.1\r\nHost: x\r\nCookie: z=\xff\xfe\r\nCookie: a=2\r\nConnection: close\r\n\r\n".to_vec();
    let mut conn = celer_test_support::Raw::connect(served.addr).await;
    conn.send(&req).await;
    let res = conn.response_to("GET").await;
    assert_eq!(res.text(), "1 cookies, a=Some(\"2\")");
    served.stop().await;
}
