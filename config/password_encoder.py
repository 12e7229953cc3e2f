"""Kafka's EncryptingPasswordEncoder: how a ZooKeeper-era broker stores a dynamic password
config (listener.name.<listener>.ssl.keystore.password...) in /config/brokers/<id>, encrypted
with `password.encoder.secret`.

The stored text is Kafka's: comma-separated name:value pairs (keyFactoryAlgorithm,
cipherAlgorithm, keyLength, salt, iterations, encryptedPassword, passwordLength,
initializationVector; binary values in base64). The key is PBKDF2 (HMAC-SHA512 unless the
stored keyFactoryAlgorithm says SHA1) of the secret with a random 256-byte salt; the cipher
AES/CBC/PKCS5Padding, so a Kafka broker with the same secret reads what Samsa wrote and back.
"""

from __future__ import annotations

import base64
import os

_CIPHER = "AES/CBC/PKCS5Padding"
_FACTORIES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA1": "sha1"}
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"


def _key(secret: str, factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    algorithm = {"sha512": hashes.SHA512(), "sha1": hashes.SHA1()}[_FACTORIES[factory]]
    return PBKDF2HMAC(algorithm, key_length // 8, salt, iterations).derive(secret.encode())


def encode(secret: str, password: str, key_factory: str = DEFAULT_KEY_FACTORY,
           key_length: int = 128, iterations: int = 4096) -> str:
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    salt, iv = os.urandom(256), os.urandom(16)
    key = _key(secret, key_factory, key_length, salt, iterations)
    padder = padding.PKCS7(128).padder()
    data = padder.update(password.encode()) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    encrypted = encryptor.update(data) + encryptor.finalize()
    fields = {
        "keyFactoryAlgorithm": key_factory, "cipherAlgorithm": _CIPHER,
        "keyLength": str(key_length), "salt": base64.b64encode(salt).decode(),
        "iterations": str(iterations), "encryptedPassword": base64.b64encode(encrypted).decode(),
        "passwordLength": str(len(password)), "initializationVector": base64.b64encode(iv).decode(),
    }
    return ",".join(f"{k}:{v}" for k, v in fields.items())


def decode(secret: str, encoded: str) -> str:
    """The password; ValueError when it cannot be decoded (another secret, not an encoded
    value, a cipher other than Kafka's default)."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    try:
        fields = dict(part.split(":", 1) for part in encoded.split(","))
        if fields["cipherAlgorithm"] != _CIPHER:
            raise ValueError(f"unsupported cipher {fields['cipherAlgorithm']}")
        key = _key(secret, fields["keyFactoryAlgorithm"], int(fields["keyLength"]),
                   base64.b64decode(fields["salt"]), int(fields["iterations"]))
        decryptor = Cipher(algorithms.AES(key),
                           modes.CBC(base64.b64decode(fields["initializationVector"]))).decryptor()
        data = decryptor.update(base64.b64decode(fields["encryptedPassword"]))
        data += decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        password = (unpadder.update(data) + unpadder.finalize()).decode()
    except (KeyError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"Password could not be decoded: {exc}") from None
    if len(password) != int(fields["passwordLength"]):
        raise ValueError("Password could not be decoded, sanity check of length failed")
    return password
