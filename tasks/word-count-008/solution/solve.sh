#!/bin/bash
wc -w < /app/docs/rapid_island.txt > /app/lily.txt
