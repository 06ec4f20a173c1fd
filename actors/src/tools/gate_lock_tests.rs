//! The gate's last step, the locks: Shell holds the workspace
//! exclusively, and a cancelled or interrupted turn stops waiting for a
//! lock without starting anything.

use futures::FutureExt as _;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[tokio::test]
async fn shell_holds_the_exclusive_lock() {
    let fx = Fx::new(ReviewModes::default()).await;
    let shell = fx.shell("ls").await;
    assert_eq!(shape(&shell), Shape::Run("exclusive lock"));
    // a Read waits while the Shell call runs...
    assert!(
        fx.check("Read", json!({"path": "a.txt"}))
            .now_or_never()
            .is_none()
    );
    drop(shell);
    // ...and goes on after it
    assert_eq!(
        shape(&fx.check("Read", json!({"path": "a.txt"})).await),
        Shape::Run("path lock")
    );
    // a cancelled turn stops waiting and runs nothing
    let _held = fx.shell("ls").await;
    let waiting = fx.check("Read", json!({"path": "a.txt"}));
    fx.cancel.cancel();
    let d = waiting.await;
    assert_eq!(shape(&d), Shape::Stopped(TurnStop::Cancelled));
}

#[tokio::test]
async fn an_interrupt_ends_the_wait_for_a_lock_and_nothing_starts() {
    let fx = Fx::new(ReviewModes::all(ReviewMode::Off)).await;
    // another call (of another turn, say) holds the workspace
    let held = fx.shell("sleep 20").await;
    assert_eq!(shape(&held), Shape::Run("exclusive lock"));
    let mut waiting: Vec<_> = [
        ("Shell", json!({"command": "touch ran"})),
        ("Write", json!({"path": "a.txt", "content": "x"})),
        ("Read", json!({"path": "a.txt"})),
    ]
    .into_iter()
    .map(|(tool, args)| Box::pin(fx.check(tool, args)))
    .collect();
    for w in &mut waiting {
        assert!(w.now_or_never().is_none(), "it waits for the lock");
    }
    // a person's new message: every wait ends, while the lock is still held
    fx.interrupt.cancel();
    for w in waiting {
        // ends at once; the bound only turns a hang into a failure
        let d = tokio::time::timeout(std::time::Duration::from_secs(5), w)
            .await
            .expect("the interrupt ends the wait");
        assert_eq!(shape(&d), Shape::Stopped(TurnStop::Interrupted));
    }
    assert!(!fx.cancel.is_cancelled());
    // an interrupted turn does not queue for a free lock either
    drop(held);
    assert_eq!(
        shape(&fx.check("Read", json!({"path": "a.txt"})).await),
        Shape::Stopped(TurnStop::Interrupted)
    );
}
