//! How big a team chat may grow, and how much of it the model is sent.
//!
//! The store caps each conversation ([`MAX_CHAT_MESSAGES`] messages,
//! [`MAX_CHAT_BYTES`] sealed bytes) and each user ([`switchboard_store::MAX_CHATS_PER_USER`]
//! conversations); a full chat answers 409 naming the limit and "start a new chat".
//! A send is refused up front when the chat has no room for a turn ([`room_for_turn`]);
//! a turn that fills it on the way stops with the same message.
//!
//! What the model is sent is bounded separately ([`recent_turns`]): the newest whole
//! turns (a turn starts at one of the person's messages) whose content JSON totals at
//! most [`MODEL_HISTORY_BYTES`]; older turns are left out (not summarised: nothing is
//! made up, and the page still shows every saved message), with a notice saying how
//! many messages the model does not see. The turn just sent is always kept whole.
//!
//! Must not: drop part of a turn (a model's function call without its result would be
//! answered as unfinished), or change what is saved.

use serde_json::Value;
use switchboard_store::{MAX_CHAT_BYTES, MAX_CHAT_MESSAGES, MessageRole, UserStore};

use super::state::store_error;
use crate::error::{ApiError, ApiResult};

/// At most this much saved content (JSON bytes) is sent to the model per turn, the
/// newest turns first: about 250k tokens, a quarter of Gemini 2.5's window, leaving
/// room for tool declarations, the turn's own tool results and the answer.
pub const MODEL_HISTORY_BYTES: usize = 1024 * 1024;

/// Room a new turn needs: the person's message plus a few replies and results.
const TURN_HEADROOM_MESSAGES: i64 = 10;

/// 409 unless conversation `id` has room for a turn with `message` in it.
pub(crate) async fn room_for_turn(us: &UserStore, id: &str, message: &str) -> ApiResult<()> {
    let Some(size) = us.chat_size(id).await.map_err(store_error)? else {
        return Err(ApiError::not_found("no such chat"));
    };
    let wanted = i64::try_from(message.len())
        .unwrap_or(i64::MAX)
        .saturating_mul(2);
    if size.messages + TURN_HEADROOM_MESSAGES > MAX_CHAT_MESSAGES {
        return Err(ApiError::conflict(format!(
            "this chat has reached its limit of {MAX_CHAT_MESSAGES} messages; start a new chat to go on"
        )));
    }
    if size.bytes.saturating_add(wanted) > MAX_CHAT_BYTES {
        return Err(ApiError::conflict(format!(
            "this chat has reached its limit of {} MiB of saved messages; start a new chat to go on",
            MAX_CHAT_BYTES / (1024 * 1024)
        )));
    }
    Ok(())
}

/// The newest whole turns of `saved` within `max_bytes` of content JSON (the last turn
/// always), and how many messages were left out.
pub(crate) fn recent_turns(
    saved: Vec<(MessageRole, Value)>,
    max_bytes: usize,
) -> (Vec<(MessageRole, Value)>, usize) {
    // Where each turn starts: at a person's message (a leading run of other messages
    // counts as a turn of its own).
    let mut starts: Vec<usize> = saved
        .iter()
        .enumerate()
        .filter(|(_, (role, _))| *role == MessageRole::User)
        .map(|(i, _)| i)
        .collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    let sizes: Vec<usize> = saved.iter().map(|(_, v)| v.to_string().len()).collect();
    let mut keep_from = saved.len();
    let mut total = 0usize;
    for (n, &start) in starts.iter().enumerate().rev() {
        let end = starts.get(n + 1).copied().unwrap_or(saved.len());
        let turn: usize = sizes[start..end].iter().sum();
        let newest = end == saved.len();
        if !newest && total + turn > max_bytes {
            break;
        }
        total += turn;
        keep_from = start;
    }
    let dropped = keep_from;
    (saved.into_iter().skip(keep_from).collect(), dropped)
}

/// The notice for a turn whose model does not see `dropped` older messages.
pub(crate) fn dropped_notice(dropped: usize) -> String {
    format!(
        "The model is sent only the newest {} KiB of this chat: {dropped} older messages are left out of what it sees (they stay saved). Start a new chat for a fresh topic.",
        MODEL_HISTORY_BYTES / 1024
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: MessageRole, text: &str) -> (MessageRole, Value) {
        (role, json!({"parts": [{"text": text}]}))
    }

    #[test]
    fn the_newest_whole_turns_within_the_budget_are_kept() {
        let big = "x".repeat(400);
        let saved = vec![
            msg(MessageRole::User, &big),
            msg(MessageRole::Model, &big),
            msg(MessageRole::User, "second"),
            msg(MessageRole::Model, "call"),
            msg(MessageRole::Tool, "result"),
            msg(MessageRole::Model, "answer"),
            msg(MessageRole::User, "third"),
        ];
        let (all, dropped) = recent_turns(saved.clone(), 10_000);
        assert_eq!((all.len(), dropped), (7, 0));
        // 500 bytes: the first turn (two 400-character texts) does not fit; the second
        // is kept whole with its tool result.
        let (kept, dropped) = recent_turns(saved.clone(), 500);
        assert_eq!(dropped, 2);
        assert_eq!(kept[0], msg(MessageRole::User, "second"));
        assert_eq!(kept.len(), 5);
        // A budget smaller than the newest turn still sends that turn.
        let (kept, dropped) = recent_turns(saved, 1);
        assert_eq!((kept.len(), dropped), (1, 6));
        assert!(dropped_notice(6).contains("6 older messages"));
    }
}
