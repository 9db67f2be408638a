#!/bin/bash
mkdir -p /app/moss && tar xzf /app/fancy-saffron.tar.gz -C /app/moss
grep '^api_key=' /app/moss/forest/boulder/cobalt_plum.ini | cut -d= -f2 > /app/value.txt
