#!/bin/bash
echo 'Lisbon' > /app/city.txt
