"""The offline cloud: template.yaml deployed into moto, with real handlers, real ASL and the event plumbing.

    with LocalCloud(CloudConfig(template=Path("template.yaml"))) as cloud:
        cloud.stack.outputs            # what `sam deploy` would print
        cloud.client("stepfunctions")  # boto3 client on the offline cloud (in-process)

The template is built with `sam build` first (localcloud.runtime.build) and the built template is what gets deployed, so
every function runs from its own artifact, in worker processes of the Lambda runtime interpreter
(localcloud.runtime.lambdas) that reach the offline cloud through its endpoint. Everything else runs in this process:
moto's backends (served on `aws_port`, where the simulated services answer too), the Step Functions interpreter (with
the fixes in localcloud.fixes.sfn), SQS and TTL pollers, EventBridge delivery and schedules (localcloud.fixes.events),
Logs subscriptions and the HTTP API (localcloud.httpapi).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import boto3
from moto import mock_aws
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wsgi import LimitedStream

from localcloud import account, simulators
from localcloud.account import ACCOUNT_ID, MACIE_LOG_GROUP, Account, Credential
from localcloud.clock import Clock
from localcloud.deploy import Stack, delete, deploy, unsubscribe
from localcloud.durable.api import LambdaApi
from localcloud.durable.runtime import DurableRuntime
from localcloud.fixes import events, patches, pollers
from localcloud.httpapi import HttpApiServer, Route
from localcloud.runtime import lambda_faults
from localcloud.runtime.build import build_dir, ensure_built
from localcloud.runtime.lambdas import AsyncConfig, FunctionError, Throttled
from localcloud.simulators.macie import MacieSimulator
from localcloud.simulators.stepfunctions import StepFunctions

LOG = logging.getLogger("localcloud")

# The one local identity whose SigV4 signatures the HTTP API accepts (override with LOCALCLOUD_ACCESS_KEY_ID /
# LOCALCLOUD_SECRET_ACCESS_KEY). moto itself accepts any credentials.
DEFAULT_CREDENTIAL = Credential(
    access_key_id="AKIALOCALCLOUD00001",
    secret_access_key="localcloud-secret-key",  # noqa: S106 - a local, documented credential
    user_arn=f"arn:aws:iam::{ACCOUNT_ID}:user/local-developer",
    user_id="AIDALOCALDEVELOPER01",
    account_id=ACCOUNT_ID,
)


# An API Gateway URL as a template's Outputs build it with !Sub (https://${Api}.execute-api.${AWS::Region}...).
EXECUTE_API_URL = re.compile(
    r"https://(?:\$\{(?P<logical_id>[\w-]+)\}|(?P<api_id>[\w-]+))\.execute-api\.[^/]+(?P<path>/.*)?"
)


def log_path(template: Path, name: str) -> Path:
    """Where the offline cloud of `template` writes a log file: .aws-sam/localcloud/<name>.log beside it."""
    return build_dir(template).parent / "localcloud" / f"{name}.log"


@dataclass
class CloudConfig:
    template: Path = Path("template.yaml")
    stack_name: str = "callback-kit"
    region: str = "us-east-1"
    host: str = "127.0.0.1"
    aws_port: int = 4566  # 0 picks a free port
    http_port: int = 3000  # 0 picks a free port
    speedup: float = 1.0  # how much faster than real time the cloud's clock runs (schedules, jobs, Step Functions)
    parameters: dict[str, str] = field(default_factory=dict)
    credentials: list[Credential] = field(default_factory=lambda: [DEFAULT_CREDENTIAL])
    async_retry_delay_seconds: float = 1.0
    # Where the functions' log lines go (one file per cloud; default .aws-sam/localcloud/<stack>.log beside the
    # template); `echo_function_logs` also prints them, prefixed with the function's name, on stderr.
    function_log: Path | None = None
    echo_function_logs: bool = False
    # Opt-in faults inside every function's worker (the chaos run): a localcloud.runtime.lambda_faults configuration as
    # JSON, e.g. '{"seed": 7, "throttle": 0.05, "crash": 0.02}'; empty for none.
    faults: str = ""
    # The kind of AWS account the cloud is (localcloud.account.PROFILES): "new" (a new account's quotas, Macie off)
    # or "established".
    account: str = "new"

    @classmethod
    def from_env(cls, **overrides: Any) -> CloudConfig:
        """Settings from LOCALCLOUD_* environment variables (see README, "Offline cloud")."""
        env = os.environ
        values: dict[str, Any] = {
            "template": Path(env.get("LOCALCLOUD_TEMPLATE", "template.yaml")),
            "stack_name": env.get("LOCALCLOUD_STACK_NAME", "callback-kit"),
            "region": env.get("AWS_DEFAULT_REGION", "us-east-1"),
            "host": env.get("LOCALCLOUD_HOST", "127.0.0.1"),
            "aws_port": int(env.get("LOCALCLOUD_AWS_PORT", "4566")),
            "http_port": int(env.get("LOCALCLOUD_HTTP_PORT", "3000")),
            "speedup": float(env.get("LOCALCLOUD_SPEEDUP", "1")),
            "faults": env.get(lambda_faults.ENV, ""),
            "account": env.get("LOCALCLOUD_ACCOUNT", "new"),
        }
        if "LOCALCLOUD_ACCESS_KEY_ID" in env:
            values["credentials"] = [
                Credential(
                    env["LOCALCLOUD_ACCESS_KEY_ID"],
                    env["LOCALCLOUD_SECRET_ACCESS_KEY"],
                    DEFAULT_CREDENTIAL.user_arn,
                    DEFAULT_CREDENTIAL.user_id,
                    ACCOUNT_ID,
                )
            ]
        values.update(overrides)
        return cls(**values)


SWITCH_INTERVAL_SECONDS = 0.0005  # the GIL's handover interval while a cloud runs (CPython's default is 0.005)


class _Dispatcher(DomainDispatcherApplication):
    """moto's server app, finding each request's backend once per host: moto matches the host against every
    service's URL patterns, for every request, under one lock that all requests share."""

    def __init__(self, create_app: Callable[[Any], Any]) -> None:
        super().__init__(create_app)
        self._backends: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        if host not in self._backends:
            self._backends[host] = super().get_backend_for_host(host)
        return self._backends[host]


class _NothingToRead:
    def read(self, size: int = -1) -> bytes:
        return b""


class _KeepAliveHandler(MotoRequestHandler):
    """moto's request handler, keeping connections open between requests as AWS's endpoints do.

    werkzeug's development server ends every response with `Connection: close`, so each AWS call of a function
    opened a TCP connection, and this process accepted it and started a thread for it, one connection at a time.
    Here a connection serves request after request (HTTP/1.1 keep-alive; boto3 pools its connections), with Nagle's
    algorithm off so a response written in parts is not held back. Before the next request is read, what is left
    of the last one's body is read off the connection: werkzeug's own clean-up after a response reads whatever the
    socket holds, which on an open connection would be the next request, so it is shown nothing. A chunked request
    (whose end only its decoder knows) still closes its connection."""

    disable_nagle_algorithm = True
    _connection: Any = None  # the connection's stream while a request runs, in place of self.rfile
    _body: LimitedStream | None = None

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()  # the app's input, chunked or not, reads the connection from here on
        self._connection = self.rfile  # type: ignore[has-type]
        self.rfile = _NothingToRead()  # type: ignore[assignment]  # what werkzeug's clean-up reads
        if not environ.get("wsgi.input_terminated"):  # not chunked: the body is Content-Length bytes
            self._body = LimitedStream(self._connection, int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = self._body
        return environ

    def run_wsgi(self) -> None:
        self._body, self._connection = None, None
        try:
            super().run_wsgi()
        finally:
            if self._connection is not None:
                self.rfile = self._connection
        try:
            if self._body is None:
                raise EOFError("a chunked body")
            self._body.exhaust()
        except Exception:  # noqa: BLE001 - a body that cannot be read to its end ends its connection
            self.close_connection = True

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() == "connection" and value.lower() == "close":
            return  # werkzeug's on every response; handle_one_request closes when the client or run_wsgi asks
        super().send_header(keyword, value)


class LocalCloud:
    def __init__(self, config: CloudConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.account = Account(account.profile(config.account))  # a name no profile has fails here
        self.function_log = config.function_log or log_path(config.template, config.stack_name)
        self._log_file: TextIO | None = None
        self._log_lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self.runtime = DurableRuntime(
            build_dir(config.template),
            config.region,
            self.account,
            config.async_retry_delay_seconds,
            self._function_log_line,
        )
        if config.faults:
            lambda_faults.parse(config.faults)  # a bad configuration fails here, not in every worker
            self.runtime.faults = config.faults
        self.faults: Counter[str] = Counter()  # faults the workers injected, by kind (lambda_faults.KINDS)
        self._stacks: list[Stack] = []  # the stacks this cloud deployed and has not deleted
        self._simulators: list[simulators.Answerer] = []  # the simulators add_simulator registered, stopped by stop()
        self.stack: Stack
        if clock is not None and clock.speedup != config.speedup:
            raise ValueError(f"the clock runs at {clock.speedup}x, the config says {config.speedup}x")
        self.clock = clock or Clock(config.speedup)  # the one clock: schedules, simulated jobs, Step Functions timers
        self.http: HttpApiServer | None = None
        self._mock = mock_aws(
            config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        )
        self._threads: list[Any] = []
        self.server: BaseWSGIServer | None = None

    # --- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> LocalCloud:
        cfg = self.config
        for name, value in {
            "AWS_DEFAULT_REGION": cfg.region,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            os.environ.setdefault(name, value)
        # CPython hands the GIL over every 5 ms. This process serves the functions' calls on short-lived request threads
        # that need the GIL back after every read and write, behind hundreds of interpreter threads; every handover
        # they waited up to 5 ms. At 0.5 ms a busy cloud answers them sooner: resume latency p99 at 100 in flight
        # 1.2-1.9 s -> 0.4-0.7 s (docs/offline-cloud.md, "Under load"), for a few per cent more switching.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        self._mock.start()
        self._patches = patches.offline_cloud(self.runtime, self._deliver, self.send_to, self.clock)
        self._patches.install()
        self.runtime.send_to_destination = self.send_to

        try:  # a cloud that cannot start (a build that fails, a stack rolled back) leaves nothing running
            self._serve(cfg)
        except BaseException:
            self.stop()
            raise
        return self

    def _serve(self, cfg: CloudConfig) -> None:
        """Build, serve the endpoint, deploy the stack, serve its HTTP API and start the pollers and the scheduler."""
        built = ensure_built(cfg.template, self.runtime.python)
        self.function_log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.function_log, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per AWS call
        # moto's server app behind the simulators' (requests signed for a simulated service go to its simulator).
        app = simulators.wsgi(_Dispatcher(create_backend_app))
        self.server = make_server(cfg.host, cfg.aws_port, app, threaded=True, request_handler=_KeepAliveHandler)
        threading.Thread(target=self.server.serve_forever, name="localcloud-endpoint", daemon=True).start()
        self.aws_endpoint = f"http://{cfg.host}:{self.server.port}"
        os.environ["MOTO_PORT"] = str(self.server.port)
        self.runtime.endpoint = self.aws_endpoint

        self._answer_for_the_account()
        self._built = built
        self.stack = self.deploy_stack(cfg.stack_name, cfg.parameters)
        routes = self._http_routes()
        if routes:
            self.http = HttpApiServer(
                routes,
                self.runtime.invoke,
                cfg.credentials,
                cfg.host,
                cfg.http_port,
                cfg.region,
                throttled=(Throttled,),
            )
            self.http.start()
            self.stack.outputs = self._local_outputs()

        self.scheduler = events.Scheduler(cfg.region, ACCOUNT_ID, self.clock)
        self._threads = [
            pollers.SqsPoller(self.runtime, cfg.region, ACCOUNT_ID),
            pollers.TtlSweeper(cfg.region, ACCOUNT_ID),
            self.scheduler,
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        for simulator in self._simulators:  # only this cloud's: a cloud nested in another leaves the outer's be
            simulators.unregister(simulator)
        for stack in self._stacks:  # and the account's log groups with the subscriptions they had (two at most)
            unsubscribe(stack, self.config.region)
        for thread in self._threads:
            thread.stop()
        if self.http:
            self.http.stop()
        self.runtime.drain(timeout=5)
        self.runtime.stop()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
        self._patches.uninstall()
        self._mock.stop()
        sys.setswitchinterval(self._switch_interval)
        if self._log_file:
            self._log_file.close()

    def __enter__(self) -> LocalCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- access ---------------------------------------------------------------------------------------------------
    def client(self, service: str) -> Any:
        """A boto3 client on the offline cloud, in-process (the functions' workers reach it through `aws_endpoint`).
        One per service, created under a lock: botocore clients are thread-safe once made, creating them is not
        (and costs milliseconds)."""
        with self._clients_lock:
            if service not in self._clients:
                self._clients[service] = boto3.client(service, region_name=self.config.region)  # type: ignore[call-overload]
            return self._clients[service]

    def invoke_function(self, logical_id: str, event: Any) -> tuple[Any, bool]:
        """Invoke a function of the stack by its logical ID and wait for it (as `sam local invoke`): its response,
        or Lambda's error payload and True if the invocation failed."""
        functions = {r.logical_id: r.physical_id for r in self.stack.of_type("AWS::Lambda::Function")}
        if logical_id not in functions:
            raise KeyError(
                f"{logical_id} is not a function of the stack; its functions: {', '.join(sorted(functions))}"
            )
        try:
            return self.runtime.invoke(functions[logical_id], event, wait=True), False
        except FunctionError as exc:
            return exc.payload, True

    def add_simulator(self, simulator: simulators.Answerer) -> None:
        """Answer `simulator.service` with it, in this cloud's account."""
        if isinstance(simulator, simulators.Simulator):
            simulator.account = self.account
        simulators.register(simulator)
        self._simulators.append(simulator)

    def _answer_for_the_account(self) -> None:
        """What the account has before anything is deployed: the Lambda operations moto lacks (GetAccountSettings, the
        durable execution API: localcloud.durable), Macie as the account has it (moto's Macie is always on; a test's
        own MacieSimulator replaces this one), Macie's job log group where Macie has run jobs, and the Step Functions
        operations moto lacks (ValidateStateMachineDefinition, TestState)."""
        self.add_simulator(LambdaApi(self.account, self.config.region, self.runtime.serve_durable(self.clock)))
        self.add_simulator(StepFunctions(self.config.region, clock=self.clock))
        self.add_simulator(MacieSimulator(self.config.region, clock=self.clock))
        logs = self.client("logs")
        if (
            self.account.profile.macie_log_group
            and not logs.describe_log_groups(logGroupNamePrefix=MACIE_LOG_GROUP)["logGroups"]
        ):
            logs.create_log_group(logGroupName=MACIE_LOG_GROUP)

    # --- wiring -----------------------------------------------------------------------------------------------------
    def _deliver(self, arn: str, payload: Any) -> None:
        """An EventBridge rule target: Lambda is invoked asynchronously, a state machine gets an execution."""
        service = arn.split(":")[2]
        if service == "lambda":
            self.runtime.function(arn)  # a missing function is a delivery failure (-> retries, DLQ)
            self.runtime.invoke_async(arn, payload)
        elif service == "states":
            self.client("stepfunctions").start_execution(stateMachineArn=arn, input=json.dumps(payload))
        else:
            raise ValueError(f"unsupported target {arn}")

    def send_to(self, arn: str, message: Any, attributes: dict[str, str] | None = None) -> None:
        """Send a dead-letter or destination record to an SQS queue (with EventBridge's dead-letter message
        attributes), SNS topic, Lambda function or event bus."""
        service, resource = arn.split(":")[2], arn.split(":")[-1]
        body = json.dumps(message, default=str)
        if service == "sqs":
            url = self.client("sqs").get_queue_url(QueueName=resource)["QueueUrl"]
            message_attributes = {k: {"DataType": "String", "StringValue": v} for k, v in (attributes or {}).items()}
            self.client("sqs").send_message(QueueUrl=url, MessageBody=body, MessageAttributes=message_attributes)
        elif service == "sns":
            self.client("sns").publish(TopicArn=arn, Message=body)
        elif service == "lambda":
            self.runtime.invoke_async(arn, message)
        elif service == "events":
            self.client("events").put_events(
                Entries=[
                    {
                        "Source": "lambda",
                        "DetailType": "Lambda Function Invocation Result - Failure",
                        "Detail": body,
                        "EventBusName": arn,
                    }
                ]
            )
        else:
            raise ValueError(f"unsupported destination {arn}")

    def deploy_stack(self, name: str, parameters: dict[str, str]) -> Stack:
        """A stack of the template in this cloud's account, as `sam deploy` makes one: the cloud's own at start, and
        others beside it (`dev` and `prod` of samconfig.toml in one account). Each one's functions run, its rules,
        schedules and subscriptions deliver; only the first stack's HTTP API is served. What the account refuses
        raises StackRolledBackError (localcloud.account)."""
        cfg = self.config
        stack = deploy(self._built, name, parameters, cfg.region, f"{name}-artifacts", self.account)
        self._stacks.append(stack)
        self._configure_async_invokes(stack)
        self._configure_logging(stack)
        self.runtime.configure_durable(stack)
        return stack

    def delete_stack(self, stack: Stack) -> None:
        """Delete a stack as CloudFormation does (localcloud.deploy.delete): StackDeleteFailedError while one of its
        buckets holds objects; retained resources stay; its AWS::Macie::Session turns Macie off."""
        delete(stack, self.config.region)
        self._stacks.remove(stack)
        if stack.of_type("AWS::Macie::Session"):
            self.account.disable_macie(self.config.region)

    def _configure_async_invokes(self, stack: Stack) -> None:
        for resource in stack.of_type("AWS::Lambda::EventInvokeConfig"):
            props = resource.properties
            self.runtime.async_configs[self.runtime.function(props["FunctionName"]).function_name] = AsyncConfig(
                maximum_retry_attempts=int(props.get("MaximumRetryAttempts", 2)),
                on_failure=props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"),
            )

    def _local_outputs(self) -> dict[str, str]:
        """The stack's outputs as the offline cloud answers them: an execute-api URL of an HTTP API it serves (which
        moto's CloudFormation leaves as `https://${Api}.execute-api...`) becomes that API's local URL, same path."""
        apis = self.stack.of_type("AWS::ApiGatewayV2::Api")
        served = {api.logical_id for api in apis} | {api.physical_id for api in apis}

        def local(value: str) -> str:
            match = EXECUTE_API_URL.fullmatch(value)
            if self.http is None or match is None or (match["logical_id"] or match["api_id"]) not in served:
                return value
            return self.http.url + (match["path"] or "")

        return {key: local(value) for key, value in self.stack.outputs.items()}

    def _configure_logging(self, stack: Stack) -> None:
        for resource in stack.of_type("AWS::Lambda::Function"):
            logging_config = resource.properties.get("LoggingConfig", {})
            self.runtime.logging_configs[resource.physical_id] = {k: str(v) for k, v in logging_config.items()}

    def _function_log_line(self, function_name: str, line: str) -> None:
        with self._log_lock:
            if self.config.faults and line.startswith(lambda_faults.LOG_PREFIX):
                self.faults[line.removeprefix(lambda_faults.LOG_PREFIX).partition(" ")[0]] += 1
            if self._log_file and not self._log_file.closed:
                self._log_file.write(f"[{function_name}] {line}\n")
                self._log_file.flush()
            if self.config.echo_function_logs:
                print(f"[{function_name}] {line}", file=sys.stderr, flush=True)

    def _http_routes(self) -> list[Route]:
        """Routes of every HttpApi, read from the OpenAPI body SAM generated (as API Gateway imports it)."""
        routes = []
        for api in self.stack.of_type("AWS::ApiGatewayV2::Api"):
            body = api.properties.get("Body", {})
            schemes = body.get("components", {}).get("securitySchemes", {})
            iam = {name for name, s in schemes.items() if s.get("x-amazon-apigateway-authtype") == "awsSigv4"}
            for path, methods in body.get("paths", {}).items():
                for method, operation in methods.items():
                    uri = operation.get("x-amazon-apigateway-integration", {}).get("uri", "")
                    function = re.search(r"functions/(arn:[^/]+)/invocations", json.dumps(uri))
                    if not function:
                        continue
                    secured = any(
                        name in iam or name == "AWS_IAM" for req in operation.get("security", []) for name in req
                    )
                    verb = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
                    routes.append(Route(verb, "$default" if path == "/$default" else path, function.group(1), secured))
        return routes
