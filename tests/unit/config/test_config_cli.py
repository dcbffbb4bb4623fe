"""``kubesched config convert`` on the users' files and on kube-safe-scheduler's Policy, the
plugin-name error of ``kubesched run``/``simulate`` after the file name, and the
ImageCompatibilityFilter alias."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.config import ConfigError, load_config_from_dict, parse_yaml, policy_to_config
from kubesched.plugins import default_registry
from kubesched.plugins.image_compatibility import ImageCompatibility

CONFIGS = Path(__file__).parents[2] / "configs"
POLICY = CONFIGS / "kube-safe-scheduler-policy.cfg"


def convert(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["config", "convert", *args])
    return result.exit_code, result.stdout, result.stderr


def test_convert_prints_the_v1_file_and_warns_on_stderr() -> None:
    code, out, err = convert(str(CONFIGS / "network-traffic-v1beta1.yaml"))
    assert code == 0, err
    assert yaml.safe_load(out) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/srv/kubernetes/kube-scheduler/kubeconfig"},
        "profiles": [
            {
                "schedulerName": "custom-scheduler",
                "plugins": {
                    "score": {"enabled": [{"name": "NetworkTraffic"}], "disabled": [{"name": "*"}]}
                },
                "pluginConfig": [
                    {
                        "name": "NetworkTraffic",
                        "args": {
                            "prometheusAddress": "http://10.0.0.4:9090",
                            "networkInterface": "eth0",
                            "timeRangeInMinutes": 1,
                        },
                    }
                ],
            }
        ],
    }
    lines = err.splitlines()
    assert len(lines) == 4
    assert all(
        line.startswith(f"Warning: {CONFIGS}/network-traffic-v1beta1.yaml: ") for line in lines
    )


def test_the_printed_file_loads_without_warnings(tmp_path: Path) -> None:
    _, out, _ = convert(str(CONFIGS / "multi-profile-v1beta2.yaml"))
    again = tmp_path / "v1.yaml"
    again.write_text(out)
    code, out2, err = convert(str(again))
    assert code == 0
    assert err == ""
    assert out2 == out


def test_convert_names_the_field_it_cannot_keep(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    score:\n      enabled:\n"
        "      - name: NodeResourcesMostAllocated\n"
    )
    code, out, err = convert(str(path))
    assert code == 1
    assert out == ""
    assert f"Error: invalid configuration: {path}: profiles[0].plugins.score.enabled: " in err


def test_convert_checks_the_result(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"
        "parallelism: 0\n"
    )
    code, _, err = convert(str(path))
    assert code == 1
    assert f"{path}: parallelism: Invalid value: 0" in err


@pytest.mark.parametrize("args", [[], ["a.yaml", "--from-policy", "b.json"]])
def test_convert_takes_one_file(args: list[str]) -> None:
    code, _, err = convert(*args)
    assert code == 2
    assert "give exactly one of FILE and --from-policy FILE" in err


def test_from_policy_writes_the_extenders_kube_scheduler_needs() -> None:
    code, out, err = convert("--from-policy", str(POLICY))
    assert code == 0, err
    assert yaml.safe_load(out) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "extenders": [
            {
                "urlPrefix": "http://localhost/scheduler",
                "filterVerb": "predicates/safe-overload",
                "prioritizeVerb": "priorities/safe-overload",
                "weight": 1,
            },
            {
                "urlPrefix": "http://localhost/scheduler",
                "prioritizeVerb": "priorities/safe-balance",
                "weight": 10,
            },
        ],
    }
    assert err.splitlines() == [
        f"Warning: {POLICY}: predicates: not converted: v1 profiles name plugins instead of "
        "predicates; without profiles kube-scheduler's default plugins run",
        f"Warning: {POLICY}: priorities: not converted: v1 profiles name Score plugins and "
        "weights instead of priorities; without profiles kube-scheduler's default plugins run",
        f"Warning: {POLICY}: hardPodAffinitySymmetricWeight: 10: not converted: it is "
        "InterPodAffinity's hardPodAffinityWeight in a profile's pluginConfig now",
    ]


def test_policy_fields_as_go_reads_them() -> None:
    data, warnings = policy_to_config(
        {
            "kind": "Policy",
            "extenders": [
                {
                    "URLPrefix": "https://ext:8443",
                    "filterVerb": "filter",
                    "enableHTTPS": True,
                    "httpTimeout": 2_500_000_000,
                    "nodeCacheCapable": True,
                    "managedResources": [{"name": "example.com/foo"}],
                    "tlsConfig": {"insecure": True},
                }
            ],
        }
    )
    assert warnings == ()
    assert data["extenders"] == [
        {
            "urlPrefix": "https://ext:8443",
            "filterVerb": "filter",
            "enableHTTPS": True,
            "httpTimeout": "2.5s",
            "nodeCacheCapable": True,
            "managedResources": [{"name": "example.com/foo"}],
            "tlsConfig": {"insecure": True},
        }
    ]
    ext = load_config_from_dict(data).extenders[0]
    assert (ext.enable_https, ext.http_timeout, ext.node_cache_capable) == (True, 2.5, True)


def test_policy_errors_name_the_field() -> None:
    with pytest.raises(ConfigError) as exc:
        policy_to_config(
            {
                "kind": "Pod",
                "extenders": [{"urlPrefix": "http://x", "bogus": 1, "httpTimeout": "5s"}],
            }
        )
    assert [str(e) for e in exc.value.errors] == [
        'kind: Unsupported value: "Pod": supported values: "Policy"',
        "extenders[0].bogus: Unknown field",
        'extenders[0].httpTimeout: Invalid value: "5s": expected nanoseconds, as Go encodes it',
    ]


def test_the_policy_file_is_json_kube_scheduler_read() -> None:
    data = parse_yaml(POLICY.read_bytes())
    assert data["kind"] == "Policy"
    assert len(data["extenders"]) == 2


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_plugin_name_errors_begin_with_the_file_name(command: str) -> None:
    path = CONFIGS / "custom-plugins-v1beta1.yaml"
    result = CliRunner().invoke(main, [command, "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-3:] == [
        f"Error: invalid configuration: {path}: 2 errors:",
        '  profiles[0].plugins.score.enabled[0]: Not found: "MyCustomPluginA": no plugin with '
        "this name is registered",
        '  profiles[0].plugins.score.enabled[1]: Not found: "MyCustomPluginB": no plugin with '
        "this name is registered",
    ]


def test_a_misspelt_enabled_plugin_gets_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: TaintToleratio\n"
    )
    result = CliRunner().invoke(main, ["simulate", "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: invalid configuration: {path}: profiles[0].plugins.filter.enabled[0]: Not found: "
        '"TaintToleratio": no plugin with this name is registered (did you mean "TaintToleration"?)'
    )


def test_image_compatibility_filter_is_an_alias() -> None:
    registry = default_registry()
    assert registry["ImageCompatibilityFilter"] is ImageCompatibility
    cfg = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"plugins": {"filter": {"enabled": [{"name": "ImageCompatibilityFilter"}]}}}
            ],
        },
        plugin_names=registry,
    )
    assert cfg.profiles[0].plugins.filter.enabled[0].name == "ImageCompatibilityFilter"
