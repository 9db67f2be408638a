#!/bin/bash
mkdir -p /app/ember && tar xzf /app/fancy-dragon.tar.gz -C /app/ember
grep '^api_key=' /app/ember/fern/granite/quiet_drum.ini | cut -d= -f2 > /app/value.txt
