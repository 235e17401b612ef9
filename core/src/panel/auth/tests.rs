use super::*;
use hmac::{Hmac, KeyInit, Mac};

type HmacSha256 = Hmac<Sha256>;

const NOW_MS: u64 = 1_800_000_000_000;

fn keys() -> PanelKeys {
    PanelKeys::new("123:TOKEN", "s3cret")
}

#[test]
fn telegrams_documented_construction_is_what_is_checked() {
    // The secret key is HMAC-SHA-256(key "WebAppData", token); the hash is
    // HMAC-SHA-256(secret key, sorted fields joined by newlines), hex. Computed here by hand.
    let token = "123:TOKEN";
    let mut k = <HmacSha256 as KeyInit>::new_from_slice(b"WebAppData").unwrap();
    k.update(token.as_bytes());
    let secret: [u8; 32] = k.finalize().into_bytes().into();
    let check = "auth_date=1800000000\nquery_id=Q\nuser={\"id\":42,\"first_name\":\"Ann\"}";
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(&secret).unwrap();
    m.update(check.as_bytes());
    let hash = hex(&m.finalize().into_bytes());
    let user = percent_encoding::utf8_percent_encode(
        "{\"id\":42,\"first_name\":\"Ann\"}",
        percent_encoding::NON_ALPHANUMERIC,
    );
    let init = format!("user={user}&query_id=Q&auth_date=1800000000&hash={hash}");
    let u = verify_init_data(&init, &keys(), NOW_MS).unwrap();
    assert_eq!((u.id, u.name.as_str(), u.signed_ms), (42, "Ann", NOW_MS));
    // The same with the hash in capitals.
    let upper = init.replace(&hash, &hash.to_uppercase());
    assert!(verify_init_data(&upper, &keys(), NOW_MS).is_ok());
}

#[test]
fn bad_launch_data_is_refused_for_its_reason() {
    let k = keys();
    let user = r#"{"id":42,"first_name":"Ann"}"#;
    let at = (NOW_MS / 1000).to_string();
    let good = sign_init_data(&k, &[("user", user), ("auth_date", &at)]);
    assert!(verify_init_data(&good, &k, NOW_MS).is_ok());
    let other = PanelKeys::new("124:TOKEN", "s3cret");
    assert_eq!(
        verify_init_data(&good, &other, NOW_MS),
        Err(Refused::BadSignature)
    );
    assert_eq!(
        verify_init_data(&good, &k, NOW_MS + (INIT_DATA_MAX_AGE_S + 1) * 1000),
        Err(Refused::Expired)
    );
    let dup = format!("{good}&auth_date={at}");
    assert_eq!(verify_init_data(&dup, &k, NOW_MS), Err(Refused::Malformed));
    let no_user = sign_init_data(&k, &[("auth_date", &at)]);
    assert_eq!(verify_init_data(&no_user, &k, NOW_MS), Err(Refused::NoUser));
    let zero = sign_init_data(&k, &[("user", r#"{"id":0}"#), ("auth_date", &at)]);
    assert_eq!(verify_init_data(&zero, &k, NOW_MS), Err(Refused::NoUser));
    assert_eq!(
        verify_init_data(&"x=1&".repeat(40), &k, NOW_MS),
        Err(Refused::Malformed)
    );
    // A signing secret differing only in the webhook secret still checks launch data (that
    // key is the token's alone), but its cookies are not this bot's.
    let same_token = PanelKeys::new("123:TOKEN", "other");
    assert!(verify_init_data(&good, &same_token, NOW_MS).is_ok());
    let s = Session {
        connector: ConnectorId::new("main"),
        user: 42,
        issued_ms: NOW_MS,
    };
    assert!(read_session(&same_token, &session_cookie(&k, &s), NOW_MS).is_none());
}

#[test]
fn sessions_read_back_until_they_expire_and_csrf_tokens_belong_to_their_cookie() {
    let k = keys();
    let s = Session {
        connector: ConnectorId::new("main"),
        user: 42,
        issued_ms: NOW_MS,
    };
    let c = session_cookie(&k, &s);
    assert_eq!(read_session(&k, &c, NOW_MS + 1000), Some(s.clone()));
    assert_eq!(read_session(&k, &c, NOW_MS + SESSION_TTL_MS + 1), None);
    assert_eq!(read_session(&k, &c.replace(".42.", ".43."), NOW_MS), None);
    assert_eq!(read_session(&k, "s1.main.42", NOW_MS), None);
    let t = csrf_token(&k, &c);
    assert!(csrf_matches(&k, &c, &t));
    let other = session_cookie(&k, &Session { user: 43, ..s });
    assert!(!csrf_matches(&k, &other, &t));
    assert_eq!(cookie("a=1; __Host-clawless=v.x; b=2", COOKIE), Some("v.x"));
    assert_eq!(cookie("a=1", COOKIE), None);
}

#[test]
fn link_tokens_are_the_same_for_an_update_and_differ_otherwise() {
    let k = keys();
    let main = ConnectorId::new("main");
    let a = link_token(&k, &main, 42, 7);
    assert_eq!(a, link_token(&k, &main, 42, 7));
    assert_eq!(a.len(), 32);
    assert_ne!(a, link_token(&k, &main, 42, 8));
    assert_ne!(a, link_token(&k, &main, 43, 7));
    assert_ne!(
        a,
        link_token(&PanelKeys::new("1:X", "s3cret"), &main, 42, 7)
    );
    assert_ne!(token_digest(&a), a);
}
