"""Kafka's password encoding of dynamic password configs (config/password_encoder.py): what
Java's JCE writes with Kafka's EncryptingPasswordEncoder steps is read back, and the other way
round (checked with jshell once); the settings Kafka lets an operator change are honoured."""

from __future__ import annotations

import pytest

from samsa.config.password_encoder import decode, encode

PASSWORD = "p\u00e4ssw\u00f6rd\U0001f600"  # Java's length counts the emoji as two

# Encoded by Java 17's JCE as Kafka does (PBKDF2WithHmacSHA512, AES/GCM/NoPadding, Java's own
# 12-byte IV and 128-bit tag) with the secret "sek".
JAVA_GCM = (
    "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/GCM/NoPadding,keyLength:1"
    "28,salt:ds8Z4CoSjSdBbqQmBhgbuMipKmjje3nz2h27iXRml/ghjBdBbWuauLppLbeF7QCPHLm0to7ZeuuT36"
    "XHyzb+pKByXzwg87fXSux80AhFPNmngQBkjYSstDJBl6OLwrOFPTa9C4HWsrh31SzYFw1ILdN/5d1HhUkVxkPV"
    "yjtxnc/UUKlLnRAh7S4G9qaHqxFaCwEWzvyXUy2Buh2MZCQ+dAx3/NsejoGAhcB/8mXgyCZm6s2HdVPTlZk7/1"
    "lfBa9vWX3jEHaZC+fRoTjnl4TlZh6MqUHq8YJLxvdnjJeE1uTA29RM9Pcq0z7Pwqdq6weqoOsSrlG8iQ4zrywj"
    "gHRTEA==,iterations:4096,encryptedPassword:xxZKgoJY5OmsFi4AQtMJH5KWASjSKjkq/YAyhjdU,pa"
    "sswordLength:10,initializationVector:WNHCnv9s5cjjmVov,authenticationTagLength:128")


def test_reads_what_java_wrote() -> None:
    assert decode("sek", JAVA_GCM) == PASSWORD
    with pytest.raises(ValueError, match="could not be decoded"):
        decode("other", JAVA_GCM)


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_encoder_settings_are_stored_with_the_password(cipher: str) -> None:
    encoded = encode("sek", PASSWORD, "PBKDF2WithHmacSHA256", 256, 1024, cipher)
    fields = dict(part.split(":", 1) for part in encoded.split(","))
    assert (fields["cipherAlgorithm"], fields["keyFactoryAlgorithm"], fields["keyLength"],
            fields["iterations"], fields["passwordLength"]) == (
                cipher, "PBKDF2WithHmacSHA256", "256", "1024", "10")
    assert decode("sek", encoded) == PASSWORD
    with pytest.raises(ValueError, match="could not be decoded"):
        decode("other", encoded)
