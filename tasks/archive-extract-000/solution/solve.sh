#!/bin/bash
mkdir -p /app/topaz && tar xzf /app/lively-cabin.tar.gz -C /app/topaz
grep '^token=' /app/topaz/mesa/fern/dusty_nutmeg.ini | cut -d= -f2 > /app/birch_value.txt
