#!/bin/bash
grep -rl 'lily-8548' /app/owl > /app/moss_matches.txt
