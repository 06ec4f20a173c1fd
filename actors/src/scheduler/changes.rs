//! Changes to the set of routines: the config routines at start, and API
//! puts and deletes.

use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::RoutineOrigin;
use botfleet_memory::RoutineRecord;
use botfleet_memory::StoreError;

use super::actor::Key;
use super::actor::Loaded;
use super::actor::PutRoutine;
use super::actor::SchedulerError;
use super::actor::SchedulerState;
use super::fire::commit;
use super::spec::RoutineSpec;
use super::spec::Schedule;

/// A record for `spec`, keeping the schedule's progress of `existing` when
/// its cron expression and time zone did not change.
fn build_record(
    existing: Option<&RoutineRecord>,
    bot: &BotId,
    spec: &RoutineSpec,
    origin: RoutineOrigin,
    schedule: &Schedule,
    now: i64,
) -> RoutineRecord {
    let same_schedule = existing.filter(|e| e.cron == spec.cron && e.timezone == spec.timezone);
    RoutineRecord {
        bot: bot.clone(),
        name: spec.name.clone(),
        cron: spec.cron.clone(),
        timezone: spec.timezone.clone(),
        prompt: spec.prompt.clone(),
        silent_ok: spec.silent_ok,
        catch_up: spec.catch_up,
        origin,
        next_fire_ms: match same_schedule {
            Some(e) => e.next_fire_ms,
            None => schedule.next_after(now),
        },
        last_fire_ms: existing.and_then(|e| e.last_fire_ms),
        created_at: existing.map(|e| e.created_at).unwrap_or(now),
        updated_at: now,
    }
}

fn same_definition(a: &RoutineRecord, b: &RoutineRecord) -> bool {
    RoutineRecord {
        updated_at: 0,
        ..a.clone()
    } == RoutineRecord {
        updated_at: 0,
        ..b.clone()
    }
}

/// Makes the config routines exactly those of fleet.toml: new and changed
/// ones are written, ones removed from the file are deleted. API routines
/// are left alone.
pub(super) async fn sync_config(state: &mut SchedulerState) -> Result<(), StoreError> {
    let now = state.args.clock.now_ms();
    let mut batch = Vec::new();
    let config = state.args.config.clone();
    let mut wanted = Vec::with_capacity(config.len());
    for (bot, spec) in config.iter() {
        let schedule = match spec.validate() {
            Ok(s) => s,
            Err(e) => {
                // fleet.toml is validated before start; this is a bug
                tracing::error!(%bot, routine = %spec.name, error = %e, "config routine is not valid");
                continue;
            }
        };
        let key = (bot.clone(), spec.name.clone());
        // an API routine whose name differs from the file's only in case
        // is one name to people, as the API's own check holds (QA: both
        // were kept, each with its schedule and session): replaced as one
        // of the file's name is
        let twin = state
            .routines
            .iter()
            .find(|((b, n), l)| {
                b == bot
                    && *n != spec.name
                    && n.eq_ignore_ascii_case(&spec.name)
                    && l.record.origin == RoutineOrigin::Api
            })
            .map(|(k, _)| k.clone());
        if let Some(twin) = twin.and_then(|k| state.routines.remove(&k)) {
            let note = replaced_note(&twin.record, &spec.name);
            tracing::warn!(%bot, routine = %twin.record.name, "{note}");
            state.args.replaced.lock().push(note);
            batch.push(Mutation::DeleteRoutine {
                bot: twin.record.bot.clone(),
                name: twin.record.name.clone(),
            });
        }
        let mut existing = state.routines.get(&key).map(|l| &l.record);
        if let Some(api) = existing.filter(|e| e.origin == RoutineOrigin::Api) {
            // documented (the file's wins), but said: the owner's routine
            // is gone for good (QA, 2026-12-04: it went without a word)
            let note = replaced_note(api, &spec.name);
            tracing::warn!(%bot, routine = %spec.name, "{note}");
            state.args.replaced.lock().push(note);
            // another routine: none of its schedule, age or runs are this
            // one's (QA, 2026-12-05: its last run and created_at were
            // listed as the file routine's, and that run offered a retry)
            existing = None;
        }
        let record = build_record(existing, bot, spec, RoutineOrigin::Config, &schedule, now);
        if !existing.is_some_and(|e| same_definition(e, &record)) {
            batch.push(Mutation::PutRoutine(Box::new(record.clone())));
        }
        state.routines.insert(
            key.clone(),
            Loaded {
                record,
                schedule: Some(schedule),
            },
        );
        wanted.push(key);
    }
    let removed: Vec<Key> = state
        .routines
        .iter()
        .filter(|(k, l)| l.record.origin == RoutineOrigin::Config && !wanted.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    for key in removed {
        state.routines.remove(&key);
        batch.push(Mutation::DeleteRoutine {
            bot: key.0,
            name: key.1,
        });
    }
    if !batch.is_empty() {
        commit(&state.args.rt, batch).await?;
    }
    Ok(())
}

/// What the banner says of an API routine the fleet-file routine `file`
/// replaced (of its name, or of one differing only in case): the bot, the
/// name and what it was, so its owner can make it again under another
/// name.
fn replaced_note(api: &RoutineRecord, file: &str) -> String {
    let prompt = match api.prompt.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &api.prompt[..cut]),
        None => api.prompt.clone(),
    };
    let whose = if api.name == file {
        "of that name".to_owned()
    } else {
        format!("{file:?}, a name differing from it only in case")
    };
    format!(
        "routine {name:?} of bot {bot} made through the API (cron {cron:?}, timezone {tz}, \
         prompt {prompt:?}) is replaced by the fleet file's routine {whose}; to keep it, \
         put it again under another name (`botfleet routines put {bot} NAME …`)",
        name = api.name,
        bot = api.bot,
        cron = api.cron,
        tz = api.timezone,
    )
}

pub(super) async fn put(
    state: &mut SchedulerState,
    bot: BotId,
    spec: RoutineSpec,
) -> Result<PutRoutine, SchedulerError> {
    let schedule = spec.validate()?;
    if state.args.rt.store.get_bot(&bot).await?.is_none() {
        return Err(SchedulerError::UnknownBot(bot));
    }
    let key = (bot.clone(), spec.name.clone());
    let existing = state.routines.get(&key).map(|l| &l.record);
    if existing.is_some_and(|e| e.origin == RoutineOrigin::Config) {
        return Err(SchedulerError::ConfigOwned { name: spec.name });
    }
    if existing.is_none()
        && let Some(((_, other), listed)) = state
            .routines
            .iter()
            .find(|((b, n), _)| *b == bot && n.eq_ignore_ascii_case(&spec.name))
    {
        let fix = if listed.record.origin == RoutineOrigin::Config {
            "that one is defined in fleet.toml: change it there, or give this one another name"
                .to_owned()
        } else {
            format!("put it as {other:?} to replace that one, or give it another name")
        };
        return Err(SchedulerError::NameClash {
            name: spec.name,
            existing: other.clone(),
            fix,
        });
    }
    // the scheduler handles one message at a time: no other put can
    // create the routine between this lookup and the commit
    let created = existing.is_none();
    let now = state.args.clock.now_ms();
    let record = build_record(existing, &bot, &spec, RoutineOrigin::Api, &schedule, now);
    commit(
        &state.args.rt,
        vec![Mutation::PutRoutine(Box::new(record.clone()))],
    )
    .await?;
    state.routines.insert(
        key,
        Loaded {
            record: record.clone(),
            schedule: Some(schedule),
        },
    );
    Ok(PutRoutine { record, created })
}

pub(super) async fn delete(
    state: &mut SchedulerState,
    bot: BotId,
    name: String,
) -> Result<bool, SchedulerError> {
    let key = (bot, name);
    match state.routines.get(&key).map(|l| l.record.origin) {
        None => return Ok(false),
        Some(RoutineOrigin::Config) => return Err(SchedulerError::ConfigOwned { name: key.1 }),
        Some(RoutineOrigin::Api) => {}
    }
    commit(
        &state.args.rt,
        vec![Mutation::DeleteRoutine {
            bot: key.0.clone(),
            name: key.1.clone(),
        }],
    )
    .await?;
    state.routines.remove(&key);
    Ok(true)
}
