"""Kafka's EncryptingPasswordEncoder: how a ZooKeeper-era broker stores a dynamic password
config (listener.name.<listener>.ssl.keystore.password...) in /config/brokers/<id>, encrypted
with `password.encoder.secret`.

The stored text is Kafka's: comma-separated name:value pairs (keyFactoryAlgorithm,
cipherAlgorithm, keyLength, salt, iterations, encryptedPassword, passwordLength,
initializationVector, and authenticationTagLength for GCM; binary values in base64). The key
is PBKDF2 (HMAC-SHA512 unless password.encoder.keyfactory.algorithm, or the stored
keyFactoryAlgorithm, says SHA256 or SHA1) of the secret with a random 256-byte salt; the cipher
password.encoder.cipher.algorithm (AES/CBC/PKCS5Padding by default; the stored one decodes),
so a Kafka broker with the same secret reads what Samsa wrote and back. Every value used to
encode is stored with the password: changing the encoder's settings keeps old values readable.
"""

from __future__ import annotations

import base64
import os

DEFAULT_CIPHER = "AES/CBC/PKCS5Padding"
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
_FACTORIES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256",
              "PBKDF2WithHmacSHA1": "sha1"}
# The JCE transformations Samsa has (GCM with a 12-byte IV and a 128-bit tag, as Java makes
# them).
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
KEY_FACTORIES = tuple(_FACTORIES)
_GCM_IV_BYTES = 12
_GCM_TAG_BITS = 128


def _key(secret: str, factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    if factory not in _FACTORIES:
        raise ValueError(f"unsupported key factory algorithm {factory}")
    algorithm = {"sha512": hashes.SHA512(), "sha256": hashes.SHA256(),
                 "sha1": hashes.SHA1()}[_FACTORIES[factory]]
    return PBKDF2HMAC(algorithm, key_length // 8, salt, iterations).derive(secret.encode())


def _java_length(text: str) -> int:
    """String.length() in Java: UTF-16 code units (Kafka's passwordLength)."""
    return len(text.encode("utf-16-le")) // 2


def encode(secret: str, password: str, key_factory: str = DEFAULT_KEY_FACTORY,
           key_length: int = 128, iterations: int = 4096,
           cipher: str = DEFAULT_CIPHER) -> str:
    """ValueError for a cipher, key factory or key length Samsa does not have."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if cipher not in CIPHERS:
        raise ValueError(f"unsupported cipher {cipher}")
    salt = os.urandom(256)
    key = _key(secret, key_factory, key_length, salt, iterations)
    params: dict[str, str]
    if cipher == "AES/GCM/NoPadding":
        iv = os.urandom(_GCM_IV_BYTES)
        encrypted = AESGCM(key).encrypt(iv, password.encode(), None)
        params = {"initializationVector": base64.b64encode(iv).decode(),
                  "authenticationTagLength": str(_GCM_TAG_BITS)}
    else:
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(data) + encryptor.finalize()
        params = {"initializationVector": base64.b64encode(iv).decode()}
    fields = {
        "keyFactoryAlgorithm": key_factory, "cipherAlgorithm": cipher,
        "keyLength": str(key_length), "salt": base64.b64encode(salt).decode(),
        "iterations": str(iterations), "encryptedPassword": base64.b64encode(encrypted).decode(),
        "passwordLength": str(_java_length(password)), **params,
    }
    return ",".join(f"{k}:{v}" for k, v in fields.items())


def decode(secret: str, encoded: str) -> str:
    """The password; ValueError when it cannot be decoded (another secret, not an encoded
    value, a cipher Samsa does not have)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        fields = dict(part.split(":", 1) for part in encoded.split(","))
        cipher = fields["cipherAlgorithm"]
        if cipher not in CIPHERS:
            raise ValueError(f"unsupported cipher {cipher}")
        key = _key(secret, fields["keyFactoryAlgorithm"], int(fields["keyLength"]),
                   base64.b64decode(fields["salt"]), int(fields["iterations"]))
        iv = base64.b64decode(fields["initializationVector"])
        encrypted = base64.b64decode(fields["encryptedPassword"])
        if cipher == "AES/GCM/NoPadding":
            if int(fields["authenticationTagLength"]) != _GCM_TAG_BITS:
                raise ValueError("unsupported GCM tag length")
            password = AESGCM(key).decrypt(iv, encrypted, None).decode()
        else:
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            data = decryptor.update(encrypted) + decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(data) + unpadder.finalize()).decode()
    except (KeyError, ValueError, TypeError, UnicodeDecodeError, InvalidTag) as exc:
        raise ValueError(f"Password could not be decoded: {exc!r}") from None
    if _java_length(password) != int(fields["passwordLength"]):
        raise ValueError("Password could not be decoded, sanity check of length failed")
    return password
