//! Every endpoint, as another allowed person: nothing of the owner's is shown or changed.

use futures::executor::block_on;
use serde_json::json;

use super::support::{SECRET, TOKEN};
use super::{call, harness, launch, now_s, OTHER_ID};
use clawless_testkit::fixtures::OWNER_ID;

/// Every endpoint, as another allowed person: nothing of the owner's is shown or changed.
#[test]
fn a_person_reaches_only_their_own() {
    block_on(async {
        let h = harness();
        let now = now_s(&h);
        let owner = format!("tma {}", launch(TOKEN, OWNER_ID, now));
        let other = format!("tma {}", launch(TOKEN, OTHER_ID, now));
        // The owner's memory and reminder.
        let path = "/api/memory/file?agent=assistant&path=MEMORY.md";
        let r = call(
            &h,
            "PUT",
            path,
            &owner,
            Some(json!({"text": "owner secret: the dentist is Dr Who\n"})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let id = {
            use clawless_core::schedule::{when, zone::Zone, Origin, Schedules, What};
            let s = Schedules {
                kv: &*h.platform.kv,
                clock: &*h.clock,
                wake: None,
            };
            let utc = Zone::utc();
            let first = when::first(&json!({"in_minutes": 60}), now * 1000, &utc).unwrap();
            let origin = Origin {
                connector: "main".into(),
                chat: OWNER_ID,
                chat_type: "private".into(),
                thread: None,
                user: OWNER_ID,
                user_name: "Ada".into(),
            };
            s.create(origin, What::Text("owner's reminder".into()), first, &utc)
                .await
                .unwrap()
                .unwrap()
                .id
        };

        // The owner's workspace file (what the file tools wrote).
        let plans = "workspace/assistant/main/u111111111/plans/dentist.md";
        h.platform
            .files
            .write(plans, b"owner secret: see the dentist")
            .await
            .unwrap();
        let file = "/api/files/file?agent=assistant&path=plans%2Fdentist.md";

        // Reads: none shows the owner's data.
        for p in [
            "/api/memory",
            "/api/memory?q=dentist",
            path,
            "/api/reminders",
            "/api/usage",
            "/api/files",
            file,
        ] {
            let r = call(&h, "GET", p, &other, None).await;
            assert!(
                !r.body.contains("dentist") && !r.body.contains("owner's reminder"),
                "{p}: {}",
                r.body
            );
            assert!(r.status == 200 || r.status == 404, "{p}: {}", r.status);
        }
        // The owner's conversation.
        h.script(
            200,
            clawless_testkit::llm::anthropic_text("I answer questions."),
        );
        h.deliver("private_text", 3).await;
        let theirs = format!("/api/conversations/messages?key=main%3A{OWNER_ID}");
        assert_eq!(call(&h, "GET", &theirs, &other, None).await.status, 404);
        let r = call(&h, "GET", "/api/conversations", &other, None).await;
        assert!(!r.body.contains(&OWNER_ID.to_string()), "{}", r.body);
        let r = call(&h, "GET", &theirs, &owner, None).await;
        assert!(r.body.contains("What can you do?"), "{}", r.body);
        // Traversal toward the owner's scope.
        for p in [
            "/api/memory/file?agent=assistant&path=../u111111111/MEMORY.md",
            "/api/memory/file?agent=assistant/main/u111111111&path=MEMORY.md",
            "/api/memory/file?agent=..&path=MEMORY.md",
            "/api/files/file?agent=assistant&path=..%2Fu111111111%2Fplans%2Fdentist.md",
            "/api/files/file?agent=assistant%2Fmain%2Fu111111111&path=plans%2Fdentist.md",
            "/api/files/file?agent=assistant&path=%2Fworkspace%2Fassistant%2Fmain%2Fu111111111%2Fplans%2Fdentist.md",
            "/api/files/file?agent=assistant&path=plans%2F%2e%2e%2F..%2Fu111111111%2Fplans%2Fdentist.md",
        ] {
            let r = call(&h, "GET", p, &other, None).await;
            assert!(r.status == 400 || r.status == 404, "{p}: {}", r.status);
            assert!(!r.body.contains("owner secret"), "{p}: {}", r.body);
        }
        // Changes: the owner's reminder and memory stay.
        assert_eq!(
            call(&h, "DELETE", &format!("/api/reminders/{id}"), &other, None)
                .await
                .status,
            404
        );
        assert_eq!(call(&h, "DELETE", path, &other, None).await.status, 404);
        assert_eq!(call(&h, "DELETE", file, &other, None).await.status, 404);
        assert!(
            h.platform.files.read(plans).await.is_ok(),
            "the owner's file stays"
        );
        // Owner-only pages.
        for (m, p) in [
            ("GET", "/api/audit"),
            ("GET", "/api/pairing"),
            ("POST", "/api/pairing/approve"),
            ("POST", "/api/pairing/remove"),
            ("GET", "/api/health"),
            ("GET", "/api/config"),
            ("GET", "/api/hooks"),
        ] {
            let r = call(
                &h,
                m,
                p,
                &other,
                Some(json!({"user": OWNER_ID, "code": "X"})),
            )
            .await;
            assert_eq!(r.status, 403, "{m} {p}");
        }
        let r = call(&h, "GET", "/api/reminders", &owner, None).await;
        assert!(r.body.contains("owner's reminder"), "{}", r.body);
        let r = call(&h, "GET", path, &owner, None).await;
        assert!(r.body.contains("dentist"));
        // The owner's own files: listed, shown, deleted.
        let r = call(&h, "GET", "/api/files", &owner, None).await;
        assert_eq!(
            super::json_of(&r)["workspaces"][0]["files"],
            json!(["plans/dentist.md"])
        );
        let r = call(&h, "GET", file, &owner, None).await;
        assert_eq!(super::json_of(&r)["text"], "owner secret: see the dentist");
        assert_eq!(call(&h, "DELETE", file, &owner, None).await.status, 200);
        assert!(h.platform.files.read(plans).await.is_err());
        assert_eq!(call(&h, "GET", file, &owner, None).await.status, 404);
        // The owner's own pages answer, and the configuration holds no secret.
        for p in [
            "/api/audit",
            "/api/pairing",
            "/api/health",
            "/api/config",
            "/api/hooks",
        ] {
            let r = call(&h, "GET", p, &owner, None).await;
            assert_eq!(r.status, 200, "{p}: {}", r.body);
            assert!(!r.body.contains(TOKEN) && !r.body.contains(SECRET), "{p}");
        }
        assert_eq!(
            call(&h, "DELETE", &format!("/api/reminders/{id}"), &owner, None)
                .await
                .status,
            200
        );
    });
}
