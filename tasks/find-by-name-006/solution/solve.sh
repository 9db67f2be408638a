#!/bin/bash
find /app/maple -type f -name '*.json' > /app/candle_found.txt
