"""Confluent Schema Registry's errors: an HTTP status and an error_code in the JSON body."""

from __future__ import annotations


class RegistryError(Exception):
    """An answer other than success: `status` is the HTTP status, `error_code` Confluent's code
    (the status followed by two digits, or the status itself)."""

    def __init__(self, status: int, error_code: int, message: str,
                 forwardable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.forwardable = forwardable  # the primary may answer it: nothing was done here

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


_DELETES = {  # Confluent's codes of a delete done in the wrong order
    40404: "Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
    40405: "Subject '{subject}' was not deleted first before being permanently deleted",
    40406: "Subject '{subject}' Version {version} was soft deleted. Set permanent=true to "
           "delete permanently",
    40407: "Subject '{subject}' Version {version} was not deleted first before being "
           "permanently deleted",
    40408: "Subject '{subject}' does not have subject-level compatibility configured",
    40409: "Subject '{subject}' does not have subject-level mode configured",
}
SUBJECT_SOFT_DELETED, SUBJECT_NOT_SOFT_DELETED = 40404, 40405
VERSION_SOFT_DELETED, VERSION_NOT_SOFT_DELETED = 40406, 40407
SUBJECT_CONFIG_NOT_FOUND, SUBJECT_MODE_NOT_FOUND = 40408, 40409


def not_found(code: int, subject: str, version: int | None = None) -> RegistryError:
    """One of the 404s of _DELETES."""
    return RegistryError(404, code, _DELETES[code].format(subject=subject, version=version))


def incompatible(messages: list[str]) -> RegistryError:
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                         "schema for subject; details: " + "; ".join(messages))


def referenced(subject: str, version: int) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema "
                         f"{{subject={subject},version={version}}}.")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version "
                         "id. Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, "
                         f"backward, forward, full, backward_transitive, forward_transitive, and "
                         f"full_transitive (got {level!r})")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, "
                         "READONLY, READONLY_OVERRIDE and IMPORT")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def unprocessable(detail: str) -> RegistryError:
    return RegistryError(422, 422, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def timeout(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {detail}")


def not_primary(detail: str, forwardable: bool = False) -> RegistryError:
    # 503: a client given several registry URLs tries the next one on it (a retriable status)
    return RegistryError(503, 50003, f"Error while forwarding the request to the primary: "
                         f"{detail}", forwardable)
