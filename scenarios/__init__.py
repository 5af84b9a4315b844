"""The shipped sample incidents, installed as the data package `verity_scenarios` (see setup.py;
read through `pipeline.package_data`). Each folder with a scenario.json is one incident."""
