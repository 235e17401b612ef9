//! Cache reads and writes read from each provider's answer and priced.

use serde_json::json;

use super::{Price, Tally, Usage};
use crate::llm::{anthropic, openai};

/// Anthropic's price for Claude Sonnet 4.5 with the 5-minute TTL, as `providers.d` has it.
fn sonnet() -> Price {
    Price {
        input: 3.0,
        output: 15.0,
        cache_read: Some(0.3),
        cache_write: Some(3.75),
    }
}

fn anthropic_answer(usage: serde_json::Value) -> Vec<u8> {
    json!({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": usage})
        .to_string()
        .into_bytes()
}

#[test]
fn anthropic_cache_writes_and_reads_are_read_and_priced_apart() {
    let body = anthropic_answer(json!({
        "input_tokens": 50,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 4000,
        "output_tokens": 20,
    }));
    let usage = anthropic::parse_response(&body).unwrap().usage;
    assert_eq!(
        usage,
        Usage {
            input: 1050,
            output: 20,
            cached_input: 4000,
            cache_write: 1000,
        }
    );
    // 50 × 3 + 1,000 × 3.75 + 4,000 × 0.30 + 20 × 15 millionths of a dollar.
    assert_eq!(usage.cost_micros(&sonnet()), 150 + 3750 + 1200 + 300);
    // Uncached, the same 5,050 input tokens cost 15,150: the cache saved 2/3 of it.
    let uncached = Usage {
        input: 5050,
        output: 20,
        ..Default::default()
    };
    assert_eq!(uncached.cost_micros(&sonnet()), 15_150 + 300);
}

#[test]
fn without_cache_prices_writes_and_reads_cost_as_input() {
    let price = Price {
        input: 2.0,
        output: 0.0,
        cache_read: None,
        cache_write: None,
    };
    let usage = Usage {
        input: 300,
        output: 0,
        cached_input: 700,
        cache_write: 200,
    };
    assert_eq!(usage.cost_micros(&price), 2000);
}

#[test]
fn a_price_file_of_an_earlier_release_still_reads_cached_input() {
    let old: Price =
        serde_json::from_value(json!({"input": 3, "output": 15, "cached_input": 0.3})).unwrap();
    assert_eq!(old.cache_read, Some(0.3));
    let new: Price = serde_json::from_value(
        json!({"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}),
    )
    .unwrap();
    assert_eq!(new, sonnet());
    assert!(serde_json::from_value::<Price>(json!({"input": 1, "output": 1, "cache": 1})).is_err());
    let negative = Price {
        cache_write: Some(-1.0),
        ..sonnet()
    };
    assert!(!negative.is_valid());
}

#[test]
fn openai_cached_tokens_are_read_from_the_prompt_details_or_deepseeks_fields() {
    let answer = |usage: serde_json::Value| {
        let body = json!({
            "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": usage,
        });
        openai::parse_response(body.to_string().as_bytes())
            .unwrap()
            .usage
    };
    let read = Usage {
        input: 464,
        output: 9,
        cached_input: 1536,
        cache_write: 0,
    };
    let openai = json!({"prompt_tokens": 2000, "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 1536}});
    assert_eq!(answer(openai), read);
    let deepseek = json!({"prompt_tokens": 2000, "completion_tokens": 9,
        "prompt_cache_hit_tokens": 1536, "prompt_cache_miss_tokens": 464});
    assert_eq!(answer(deepseek), read);
    let gpt = Price {
        input: 0.15,
        output: 0.6,
        cache_read: Some(0.075),
        cache_write: None,
    };
    // 464 × 0.15 + 1,536 × 0.075 + 9 × 0.6 = 69.6 + 115.2 + 5.4.
    assert_eq!(read.cost_micros(&gpt), 190);
}

#[test]
fn a_tally_counts_reads_apart_and_says_its_hit_rate() {
    let mut t = Tally::default();
    assert_eq!(t.cache_hit_percent(), None);
    let call = Usage {
        input: 250,
        output: 10,
        cached_input: 750,
        cache_write: 200,
    };
    t.add_call(call, 5);
    t.add_call(call, 5);
    assert_eq!((t.input, t.cached_input, t.tokens()), (500, 1500, 2020));
    assert_eq!(t.cache_hit_percent(), Some(75));
}
