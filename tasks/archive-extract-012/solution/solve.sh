#!/bin/bash
mkdir -p /app/owl && tar xzf /app/smooth-kiwi.tar.gz -C /app/owl
grep '^api_key=' /app/owl/lily/cliff/golden_copper.ini | cut -d= -f2 > /app/value.txt
