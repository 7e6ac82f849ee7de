"""`remove_config_keys` (what `logout` does to the config file), on its own."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, remove_config_keys


def test_only_the_top_level_key_goes(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '# mine\napi_key = "sk-1"\nmodel = "m"\n\n[providers.x]\nbase_url = "http://h/v1"\n'
        'api_key = "sk-provider"\n'
    )
    assert remove_config_keys(path, ("api_key",)) is True
    assert path.read_text() == (
        '# mine\nmodel = "m"\n\n[providers.x]\nbase_url = "http://h/v1"\napi_key = "sk-provider"\n'
    )
    assert path.stat().st_mode & 0o777 == 0o600


def test_nothing_to_remove_leaves_the_file_alone(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('model = "m"\n')
    assert remove_config_keys(path, ("api_key",)) is False
    assert remove_config_keys(tmp_path / "missing.toml", ("api_key",)) is False
    assert path.read_text() == 'model = "m"\n'


@pytest.mark.parametrize("text", ['"api_key" = "sk-1"\n', "api_key = '''\nsk-1'''\n"])
def test_a_form_it_cannot_edit_changes_nothing(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        remove_config_keys(path, ("api_key",))
    assert path.read_text() == text
