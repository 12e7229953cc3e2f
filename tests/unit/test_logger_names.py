"""samsa.log.loggers: logger names are module paths under samsa.; the names of before the
packages were installed under that one name still select the same modules."""

from __future__ import annotations

import logging

from samsa.broker import cli
from samsa.config.schema import BrokerConfig


def test_names_without_the_samsa_prefix_still_apply() -> None:
    names = ("samsa.storage.made_up_module", "samsa.coordinator.made_up_module", "kazoo.client")
    config = BrokerConfig({"samsa.log.level": "WARN", "samsa.log.loggers":
                           "storage.made_up_module=DEBUG, samsa.coordinator.made_up_module=ERROR,"
                           " kazoo.client=INFO"})
    try:
        cli.setup_logging(config)
        assert logging.getLogger(names[0]).level == logging.DEBUG
        assert logging.getLogger(names[1]).level == logging.ERROR
        assert logging.getLogger(names[2]).level == logging.INFO  # not one of Samsa's: as is
    finally:
        for name in names:
            logging.getLogger(name).setLevel(logging.NOTSET)
