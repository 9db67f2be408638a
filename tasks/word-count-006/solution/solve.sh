#!/bin/bash
wc -l < /app/docs/cobalt_pebble.txt > /app/answer.txt
