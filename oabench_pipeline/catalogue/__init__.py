"""The model catalogue (OpenRouter's list of models): fetched, snapshotted, priced, watched for new models.

A domain over the answers, beside `phase2` and `scoring`: it reads the models registry, the cells and what
they spent (`inference`), and the engine and automation sit over it.

- `listing.py`: a listing as `model_catalogue` rows (pure); `client.py`: the fetch (httpx);
- `snapshots.py`: the stored snapshots and what changed between two; `resources.py`: the catalogue's URL;
- `assets.py`: `model_catalogue` and `catalogue_decisions`; `pricing.py`: `model_pricing`;
- `decisions.py`: which new models the watch policy takes (pure); `watch.py`: one tick of the watch (the
  sensor and `oabench catalogue sync` both run it).

Three parts live lower, because the layers below this one read them: `core/watch_policy.py` (the owner's
policy file, pure: the model client's reservations and the registry's resource read it) and
`inference/catalogue_store.py` (a model's prices and retirement, which every sending path checks); and one
higher: the sensor, `automation/catalogue_sensor.py`, beside the jobs it requests. Importing this package
imports neither Dagster nor httpx.
"""
