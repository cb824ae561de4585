//! A flow instance's saved values: what its steps' `save` wrote, seen by
//! its later steps and by no other instance. A flow instance is an arrival
//! (open model, replay), a closed-loop user's iteration, setup, or one flow
//! of `--debug`: the same instances as the cookie jar's (`cookies.rs`).
//!
//! Setup's saved values (`Work::globals`) are the shared, read-only base
//! under every scope: `${name}` reads the instance's own value first, then
//! setup's ([`crate::work::ArrivalVars`]). A flow that saves a name setup
//! saved (a `refresh-token` flow logging in again) shadows it for its own
//! later steps only. Before, saved values lived per worker, so in the open
//! model, where many arrivals of a worker are in flight at once, arrival A
//! read the `cart_id` arrival B had just saved: k6 (per VU iteration),
//! Gatling and Locust (per user session) all scope them per session.
//!
//! What it costs a flow that saves nothing: the empty scope is one word
//! (`None`, no allocation), so an arrival's future grows by a `RefCell` of a
//! pointer, and a read of `${name}` tests it before the globals. The map is
//! boxed so that a scope that saves something does not make every
//! arrival's future carry a `HashMap` inline. Measured (callgrind,
//! `--workers 1` against nginx; instructions in the engine's own source
//! files per request): `quick -n 200000 -c 50`, N = 200,000 minus N = 50,000,
//! 1,269.6 before and 1,273.9 after (the program's total, 5,284 and 5,053,
//! moves with the wake-ups). A flow that saves one value per arrival
//! (`POST /cart` saving `$.id`, then `GET /cart/${cart_id}`; open model,
//! 300 arrivals/s for 6 s, the same 1,800 arrivals in both): the engine's own
//! 2,325 and 2,266 per request (the pacer's wake-ups move it more than the
//! scope does), and malloc/free 3,235,601 and 3,846,752 in all, ~340 more
//! per arrival: the scope's box, its table and its key, where the worker's
//! map reused its table. Not here: where a value comes
//! from (`checks.rs`, `perfops_core::scenario::extract`), redaction
//! (`Work::secrets`).

use std::cell::{Ref, RefCell};
use std::collections::HashMap;

/// The values one flow instance saved, allocated on its first `save`.
///
/// Boxed on purpose: `Option<HashMap>` would put 48 bytes into every
/// arrival's future whether it saves or not; a box is one word, `None`
/// until needed, and a new scope does not seed a `RandomState` either.
#[expect(clippy::box_collection, reason = "one word in every arrival's future; see above")]
#[derive(Debug, Default)]
pub(crate) struct Scope(RefCell<Option<Box<HashMap<String, String>>>>);

impl Scope {
    /// Keep `value` under `name` for this instance's later steps.
    pub(crate) fn save(&self, name: &str, value: String) {
        let mut map = self.0.borrow_mut();
        let map = map.get_or_insert_with(Box::default);
        match map.get_mut(name) {
            Some(v) => *v = value,
            None => {
                map.insert(name.to_string(), value);
            }
        }
    }

    /// Forget this instance's own values for the names `keep` says no to
    /// (a script's `delete vars.x`); setup's stay under them.
    pub(crate) fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        if let Some(map) = self.0.borrow_mut().as_mut() {
            map.retain(|name, _| keep(name));
        }
    }

    /// What this instance saved (`None`: nothing yet). Held only while a
    /// request renders or a sample is redacted, never across an await.
    #[expect(clippy::box_collection, reason = "the scope's own type, as it is kept")]
    pub(crate) fn saved(&self) -> Ref<'_, Option<Box<HashMap<String, String>>>> {
        self.0.borrow()
    }

    /// The value `${name}` reads for this instance: its own, else setup's
    /// in `globals`.
    pub(crate) fn get(&self, name: &str, globals: &HashMap<String, String>) -> Option<String> {
        self.saved().as_ref().and_then(|m| m.get(name)).or_else(|| globals.get(name)).cloned()
    }

    /// Setup's values as it leaves them for every flow: `globals` (those
    /// of an earlier `perfops setup --out`, if any) with this instance's on
    /// top.
    pub(crate) fn into_globals(self, globals: &HashMap<String, String>) -> HashMap<String, String> {
        let mut out = globals.clone();
        out.extend(self.0.into_inner().map(|m| *m).unwrap_or_default());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
    }

    /// The lookup order: the instance's own value, then setup's.
    #[test]
    fn a_read_looks_in_the_instance_then_in_the_globals() {
        let globals = map(&[("token", "setup-token"), ("region", "eu")]);
        // (the instance's saves in order, the name read, the value read)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, Option<&'a str>);
        let cases: &[Case<'_>] = &[
            // Nothing saved: setup's value.
            (&[], "token", Some("setup-token")),
            // Nothing saved and setup has none: missing.
            (&[], "cart_id", None),
            // The instance's own value.
            (&[("cart_id", "c1")], "cart_id", Some("c1")),
            // A name setup saved, saved again by the flow: the flow's (a
            // refresh-token flow's new token, for its own later steps).
            (&[("token", "fresh")], "token", Some("fresh")),
            // Saving one name leaves setup's others visible.
            (&[("token", "fresh")], "region", Some("eu")),
            // A later save of the same name wins.
            (&[("cart_id", "c1"), ("cart_id", "c2")], "cart_id", Some("c2")),
        ];
        for (saves, name, want) in cases {
            let scope = Scope::default();
            for (n, v) in *saves {
                scope.save(n, (*v).to_string());
            }
            assert_eq!(scope.get(name, &globals).as_deref(), *want, "{saves:?} then ${{{name}}}");
        }
    }

    /// Two instances never see each other's values, and a flow's save never
    /// reaches the globals: the defect of values kept per worker.
    #[test]
    fn instances_are_apart_and_the_globals_unchanged() {
        let globals = map(&[("token", "setup-token")]);
        let (a, b) = (Scope::default(), Scope::default());
        a.save("cart_id", "from-a".into());
        b.save("cart_id", "from-b".into());
        b.save("token", "b-token".into());
        assert_eq!(a.get("cart_id", &globals).as_deref(), Some("from-a"));
        assert_eq!(b.get("cart_id", &globals).as_deref(), Some("from-b"));
        assert_eq!(a.get("token", &globals).as_deref(), Some("setup-token"));
        assert_eq!(globals, map(&[("token", "setup-token")]));
        // A third, new instance starts from the globals alone.
        assert_eq!(Scope::default().get("cart_id", &globals), None);
    }

    /// Nothing saved, nothing allocated; setup's scope becomes the globals.
    #[test]
    fn empty_until_the_first_save_and_setup_leaves_its_values() {
        let scope = Scope::default();
        assert!(scope.saved().is_none(), "no map before a save");
        scope.save("token", "t".into());
        assert!(scope.saved().is_some());
        let earlier = map(&[("token", "old"), ("user", "u")]);
        assert_eq!(scope.into_globals(&earlier), map(&[("token", "t"), ("user", "u")]));
        assert_eq!(Scope::default().into_globals(&earlier), earlier);
    }

    /// A name a script deleted leaves the instance's values; setup's value
    /// under it is read again, and the other names stay.
    #[test]
    fn a_deleted_name_falls_back_to_setups() {
        let globals = map(&[("token", "setup-token")]);
        let scope = Scope::default();
        scope.save("token", "mine".into());
        scope.save("page", "2".into());
        scope.retain(|name| name != "token" && name != "page");
        assert_eq!(scope.get("token", &globals).as_deref(), Some("setup-token"));
        assert_eq!(scope.get("page", &globals), None);
        // Nothing saved: nothing to forget, nothing allocated.
        let empty = Scope::default();
        empty.retain(|_| false);
        assert!(empty.saved().is_none());
    }
}
