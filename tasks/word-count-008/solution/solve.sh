#!/bin/bash
wc -l < /app/docs/rapid_island.txt > /app/answer.txt
